"""One module per command family; ``envcheck.cli`` registers them on the typer app."""
