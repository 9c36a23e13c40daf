"""What user-facing text (command help, README, docs, CONTRIBUTING) must not contain."""

from __future__ import annotations

import re

#: Words of the project's internal process that must not reach users.
JARGON = re.compile(r"\bseed 0\d\d\b|\bsession \d|\bissues?\b|\b[AB]-T\d|\bspecs?\b|\bproposal [AB]-\d|HELPERS", re.I)
