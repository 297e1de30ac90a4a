"""The Peregrine lab: builds Peregrine and its peers, checks every answer against the scenario
contract, measures them side by side under the same CPU split, and writes a results JSON (the
source of truth), a Markdown report and SVG charts.

Entry point: ``./scripts/lab`` (or ``python3 -m peregrine_lab`` with ``lab/`` on ``sys.path``).
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
