"""Models: the protocol the loop talks to, the OpenAI-compatible client, and scripted models."""

from agent.model.protocol import AssistantTurn, Model, ModelError, TextListener, ToolCall, Usage, estimate_tokens
from agent.model.scripted import ScriptedModel, turn

__all__ = ["AssistantTurn", "Model", "ModelError", "TextListener", "ToolCall", "Usage", "ScriptedModel",
           "estimate_tokens", "turn"]
