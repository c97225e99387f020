"""Small helpers shared by the ``dprange`` command and its ``ldp`` group."""


def with_options(options):
    """Apply a list of click options to a command, in order."""

    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func

    return decorate
