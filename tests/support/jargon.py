"""What user-facing text (command help, README, docs, CONTRIBUTING) must not contain."""

from __future__ import annotations

import re

#: Words of the project's internal process that must not reach users (item labels such as ``A-1`` or
#: ``B-T2`` included), and a paper's bibliography numbers (``that of [11]``), which readers cannot resolve.
JARGON = re.compile(r"\bseed 0\d\d\b|\bsession \d|\bissues?\b|\b[AB]-T?\d\b|\bspecs?\b|\bproposal [AB]-\d|HELPERS"
                    r"|(?<![\w\])=(])\[\d{1,2}\]", re.I)
