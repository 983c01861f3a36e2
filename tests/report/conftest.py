"""The report tests render findings built by hand. In a run, the code that produced the findings imported
the families of their rules, which registered them; here the catalog registers every family once, so a
report finds each rule's kind (``envcheck.report.interface.rule_kind``) whichever test runs first."""

from __future__ import annotations

import envcheck.app.catalog  # noqa: F401 - registers every rule family
