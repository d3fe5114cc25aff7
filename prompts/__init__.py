"""System and task prompts, kept as Markdown and loaded at run time."""
