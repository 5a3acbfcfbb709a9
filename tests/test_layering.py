"""The package's layers: envs know nothing of agents or the learner (what an env is must not
depend on who plays it), and the learner never reaches into the CLI."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "boltzoo"


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """Return, for each module below ``folder``, every boltzoo module it imports (at any depth)."""
    found = {}
    for path in folder.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(PACKAGE.parent))] = {n for n in names if n.startswith("boltzoo")}
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [("envs", ("boltzoo.agents", "boltzoo.lightningrl", "boltzoo.cli")),
     ("lightningrl", ("boltzoo.cli",))],
)  # fmt: skip
def test_no_module_imports_a_layer_above_its_own(folder, forbidden):
    upward = {
        module: sorted(n for n in names if n.startswith(forbidden))
        for module, names in imported_modules(PACKAGE / folder).items()
    }
    assert {m: names for m, names in upward.items() if names} == {}
