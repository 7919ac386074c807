"""``python -m xerj_core`` runs the ``xerj`` command."""

from xerj_core.cli import main

main()
