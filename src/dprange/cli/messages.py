"""What the ``dprange`` entry point needs to report an error, without importing the library:
library messages in the command's words (``cli_message``) and the ``--redact`` switch
(``redacting``).  Library messages name Python keywords (``clip=True``); the command line user
needs option names (``--clip``).
"""

from __future__ import annotations

import os
import re

#: The environment variable ``--redact`` sets for the run: the library then keeps private
#: quantities (counts of bad rows, raw values, row numbers) out of its messages.
REDACT_VARIABLE = "DPRANGE_REDACT"


# ---------------------------------------------------------------- messages for CLI users
#: (pattern in a library message, replacement naming the command's option), applied in order.
API_TO_OPTIONS = [
    (r"\bpass drop_missing=True\b", "pass --drop-missing"),
    (r"\bdrop_missing=True\b", "--drop-missing"),
    (r"\bpass clip=True\b", "pass --clip"),
    (r"\bclip=True\b", "--clip"),
    (r"\buse Domain\.interval for real values\b", "give --bins N (equal bins over [lo, hi]) for real values"),
    (r"\bDomain\.interval\b", "--bins N"),
    (r"\bDomain\.integers\b", "--integers"),
    (r"\binteger domain bound (lo|hi)\b", r"--\1 (one bin per integer)"),
    (r"\bdomain bound (lo|hi)\b", r"--\1"),
    (r"^bins must be\b", "--bins must be"),
    (r"^branching must be\b", "--branching must be"),
    (r"\bevery branching factor\b", "every --branching factor"),
    (r"^the branching list\b", "the --branching list"),
    (r"^budget list\b", "--budget list"),
    (r"\bevery entry of the budget list\b", "every entry of --budget"),
    (r"^epsilon must be\b", "--epsilon must be"),
    (r"^delta must be\b", "--delta must be"),
    (r"\bpass delta or use Laplace noise\b", "pass --delta or choose --noise discrete_laplace"),
    (r"^rng seed must be\b", "--seed must be"),
    (r"^k must be\b", "--queries must be"),
    (r"\binference='(\w+)'", r"--inference \1"),
]


def cli_message(text: str) -> str:
    """A library message in the command's words, on one line."""
    text = " ".join(str(text).split())
    for pattern, replacement in API_TO_OPTIONS:
        text = re.sub(pattern, replacement, text)
    return text


def redacting() -> bool:
    """Whether this run keeps private quantities out of its messages."""
    return os.environ.get(REDACT_VARIABLE, "") not in ("", "0")
