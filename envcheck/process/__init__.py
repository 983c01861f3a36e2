"""Running code in the target interpreter: the runner that starts ``envcheck.inside``'s modules there
under a deadline (``envcheck.process.runner``), the registry of live sessions that an interrupt kills
(``envcheck.process.sessions``), and the waits on worker threads that leave the main thread awake to that
interrupt (``envcheck.process.awake``). Nothing is imported here: every command imports ``sessions`` at
start, and the runner only when it starts a target."""
