"""The advisor's PNG (`ttlstate inspect --ages --plot`): per operator, one bar per bucket of the
text histogram, so the picture and the text agree; an age of 0 is in the first bar rather than
on a log axis, and the bars a `--ttl` would remove are drawn in another colour. The legend sits
outside the axes, where it covers no bar."""

from __future__ import annotations

from typing import Any

from ttlstate.cli.ages import OperatorAges
from ttlstate.config.parse import format_duration_ms

KEPT, REMOVED = "#4878d0", "#d65f5f"


def figure_of(ops: list[OperatorAges]) -> Any:
    """The matplotlib figure (Agg backend): one row of axes per operator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(ops) or 1, 1, figsize=(9, 2.8 * max(1, len(ops))), squeeze=False)
    for ax, o in zip(axes[:, 0], ops, strict=False):
        labels = [label for label, _ in o.histogram]
        counts = [n for _, n in o.histogram]
        first_removed = (o.edges_ms.index(o.ttl_ms) + 1 if o.ttl_ms is not None and o.ttl_ms in o.edges_ms
                         else len(labels))
        colours = [KEPT if i < first_removed else REMOVED for i in range(len(labels))]
        ax.bar(range(len(labels)), counts, color=colours)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        if o.ttl_ms is not None:
            ax.axvline(first_removed - 0.5, color=REMOVED, linestyle="--")
            ax.legend(handles=[Patch(color=KEPT, label="kept"),
                               Patch(color=REMOVED, label=f"ttl {format_duration_ms(o.ttl_ms)}: "
                                                          f"removes {o.removed_by_ttl}")],
                      loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
        ax.set_title(f"operator {o.operator} ({o.name or 'name unknown'}): {o.entries} entries", fontsize=10)
        ax.set_xlabel("age of last access")
        ax.set_ylabel("entries")
    fig.tight_layout()
    return fig


def plot_ages(path: str, ops: list[OperatorAges]) -> None:
    """Writes `figure_of(ops)` as a PNG, the legends included."""
    import matplotlib.pyplot as plt

    fig = figure_of(ops)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
