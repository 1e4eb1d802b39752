"""operators/ has no import cycle, counting every import: package re-exports, imports inside functions."""

import grimp


def test_no_module_of_operators_imports_itself_through_others():
    graph = grimp.build_graph("operators", cache_dir=None)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                cycles.append(" -> ".join((module, *back)))
    assert not cycles, "import cycles (move the shared code down, do not hide the import):\n" + "\n".join(cycles)
