"""The command classifier: how much can one shell command change a host?

A command is read-only only when a real bash parse (tree-sitter-bash) accounts for
every part of it: each simple command is on an allowlist *with its arguments
checked*, the commands are joined only by `&&`, `||`, `;`, `|` and newlines, and
output is redirected at most to /dev/null. Anything the classifier cannot see
through makes the command at least mutating: parse errors, command and process
substitution, variable expansion, assignments, eval and source, here-documents,
subshells and groups, background jobs, functions, control flow, and wrappers such
as sudo, env, timeout, xargs or `bash -c`.

The rest works out how much worse than mutating a command is. It looks inside
wrappers (`sudo ...`, `bash -c '...'`, `python -c`, `find -exec`, `git -c
core.pager=...`), follows simple obfuscations (quoted or escaped command names,
`x=rm; $x`, `echo BASE64 | base64 -d | sh`) and applies what it knows about
particular programs. Every detector only raises the class: `cls.at_least(...)`.

Where things are:
- `shell.py`: the entry; `analysis.py`: the walk over the bash parse tree and the verdict, made of
  `statements.py`, `simple_commands.py`, `pipes.py`, `redirections.py`, `expansions.py` and the work
  budget (`budget.py`); `tree.py` the parser;
  `words.py`, `filters.py`, `code.py` what words, pipelines and inline code become.
- `options.py`: option parsing with each program's own semantics; `paths.py`: paths and files.
- `families/`: one file per program family (wrappers, interpreters, nvidia, pip, os packages,
  services, git, find, sed and awk, text, system, files, network, containers), each holding its
  programs' rules. "Why is `sed -i` mutating?" is answered in `families/sed_awk.py`.

Choices worth knowing:
- Where tree-sitter-bash is known to misread bash (a newline swallowed into the previous command,
  `a | b | c && d` nested the wrong way, `time { ...; }` as words), the classifier follows bash's
  reading. Guesses (a glob or unknown command name, text the parser rejects) may only raise the class.
- Variable expansion is not read-only in the arguments of an allowlisted command (`ls ${dir}`):
  the value is invisible here and can smuggle in options (`sed -n p $F` with F="-i x" edits a
  file). The one exception is a plain `$x` or `${x}` in echo's arguments, which only shape what
  it prints.
- A wrapper is at least mutating even around a read-only command (`sudo -n nvidia-smi`): the
  allowlist checked the command, not the wrapper. The exception is timeout, which only limits
  how long its command runs (`timeout 5 nvidia-smi`).
- A program is read by a spec of every option it accepts (options.py): an option the spec does
  not list makes the command not read-only. Files a reader opens are checked (paths.py):
  `cat /dev/watchdog` arms the hardware watchdog. Every command is judged under a work budget.
- An unquoted glob or brace pattern that could expand to an option (`sed -n p *`) is not
  read-only for commands whose options matter; globs are fine for commands with no dangerous
  options (`ls /usr/local/cuda-*`).
"""

from agent.safety.classifier.shell import classify, classify_workload, plain_words

__all__ = ["classify", "classify_workload", "plain_words"]
