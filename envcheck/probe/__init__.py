"""Running code in the target interpreter: the runner that starts ``envcheck.target``'s modules there
under a deadline (``envcheck.probe.runner``), and the registry of live sessions that an interrupt kills
(``envcheck.probe.sessions``). Nothing is imported here: every command imports ``sessions`` at start, and
the runner only when it starts a target."""
