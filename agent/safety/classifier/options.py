"""Reading a command's options the way its own parser does."""

from __future__ import annotations

from dataclasses import dataclass

from agent.safety.classifier.command import Arg


def _short_options(args: list[Arg]) -> set[str]:
    """Letters of every short option cluster (`-rf` -> {"r", "f"}) before `--`."""
    letters: set[str] = set()
    for arg in args:
        if arg.text == "--":
            break
        if arg.text and arg.text.startswith("-") and not arg.text.startswith("--"):
            letters.update(arg.text[1:])
    return letters


def _long_options(args: list[Arg]) -> set[str]:
    names: set[str] = set()
    for arg in args:
        if arg.text == "--":
            break
        if arg.text and arg.text.startswith("--") and len(arg.text) > 2:
            names.add(arg.text.split("=", 1)[0])
    return names


def _operands(args: list[Arg]) -> list[Arg]:
    """Arguments that are not options (GNU tools accept options anywhere before `--`)."""
    out: list[Arg] = []
    after_dashes = False
    for arg in args:
        if after_dashes:
            out.append(arg)
        elif arg.text == "--":
            after_dashes = True
        elif not (arg.text and arg.text.startswith("-") and arg.text != "-"):
            out.append(arg)
    return out


def _abbreviates(name: str, full: str, minimum: int = 4) -> bool:
    """getopt_long accepts unique prefixes: `--rot` means `--rotate`."""
    return len(name) >= minimum and full.startswith(name)


# --------------------------------------------------------------------------- option parsing


@dataclass
class _Opts:
    options: list[tuple[str, Arg | None]]
    operands: list[Arg]
    unsure: bool  # an option the spec does not know: whether it takes a value is a guess

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def values(self, *names: str) -> list[Arg]:
        return [value for name, value in self.options if name in names and value is not None]


def _getopt(
    args: list[Arg],
    short_value: str = "",
    long_value: frozenset[str] | set[str] = frozenset(),
    short_flags: str | None = None,
    long_flags: frozenset[str] | set[str] | None = None,
    permute: bool = False,
    short_optional: str = "",
) -> _Opts:
    """getopt-style split of options and operands. Without permute, parsing stops at the first operand."""
    options: list[tuple[str, Arg | None]] = []
    operands: list[Arg] = []
    unsure = False
    known_long = set(long_value) | set(long_flags or ())
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        if text is None:
            unsure = True
            if not permute:
                operands.extend(args[index:])
                break
            operands.append(arg)
            index += 1
            continue
        if text == "--":
            operands.extend(args[index + 1:])
            break
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            matches = [k for k in known_long if k.startswith(name)]
            if name not in known_long and len(matches) == 1:
                name = matches[0]
            if name in long_value and not equals:
                options.append((name, args[index + 1] if index + 1 < len(args) else None))
                index += 2
                continue
            if long_flags is not None and name not in known_long:
                unsure = True
            options.append((name, Arg(value) if equals else None))
            index += 1
            continue
        if text.startswith("-") and len(text) > 1:
            position = 1
            while position < len(text):
                letter = text[position]
                rest = text[position + 1:]
                if letter in short_value:
                    if rest:
                        options.append(("-" + letter, Arg(rest)))
                    else:
                        options.append(("-" + letter, args[index + 1] if index + 1 < len(args) else None))
                        index += 1
                    break
                if letter in short_optional:
                    options.append(("-" + letter, Arg(rest) if rest else None))
                    break
                if short_flags is not None and letter not in short_flags:
                    unsure = True
                options.append(("-" + letter, None))
                position += 1
            index += 1
            continue
        if not permute:
            operands.extend(args[index:])
            break
        operands.append(arg)
        index += 1
    return _Opts(options, operands, unsure)
