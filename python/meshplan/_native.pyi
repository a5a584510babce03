"""Type stubs of the meshplan extension module (Rust, PyO3)."""

from typing import List

__version__: str

class NativeInputError(Exception):
    """Bad input: ``args`` is ``(message, [{"field", "value", "message", "hint"}, ...])``."""

class NativeError(Exception):
    """meshplan failed for another reason: ``args[0]`` says why."""

def run(words: List[str], interruptible: bool = False) -> str:
    """Runs ``meshplan WORDS...`` in this process, the GIL released, and returns what the CLI
    would print; ``interruptible`` runs it on its own thread so that Ctrl-C stops the wait."""
