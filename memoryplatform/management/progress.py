"""A progress bar's output for management commands (dream, embed)."""

from django.core.management.base import OutputWrapper


class Unended:
    """The command's stderr as tqdm's file: tqdm writes partial lines (``\\r`` updates), and
    ``OutputWrapper.write`` would end each with a newline (and colour it as an error) unless told not to."""

    def __init__(self, out: OutputWrapper) -> None:
        self.out = out

    def write(self, text: str) -> None:
        self.out.write(text, style_func=str, ending="")  # no error colour on a progress bar

    def flush(self) -> None:
        self.out.flush()
