"""Where a request's flow comes from and the spec that runs: a flow's name to its file and spec (built-in, else the
tenant's saved one: a name is never read as a file path), and the asked spec made the one that runs (cut to
``top_k``, its unset indices set, every index and file confined to the roots, its steps placed on this app's
deployments). ``Service`` (serve/service.py) has these as its methods; it owns the roots, indices and deployments.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from flows import store as flow_store
from flows.spec import FlowSpec
from operators.errors import SpecError, one_line
from serve.security.auth import LOCAL_TENANT
from serve.http.errors import ApiError
from serve.runs.flow_request import Asked, with_top_k
from serve.indices.index_roots import confine, confine_spec, index_params
from serve.runs.served_models import placed

if TYPE_CHECKING:
    from serve.indices.indices import Indices


class FlowFile(NamedTuple):
    """A flow file and the version of it that was read (``flow_file``): a file saved again has another inode
    (``flows.store`` replaces it), mtime or size."""

    path: str
    mtime_ns: int
    size: int
    inode: int


def flow_owner(tenant: str) -> str | None:
    """Where a tenant's saved flows live in ``flows.store``: the shared folder for the keyless ``local``."""
    return None if tenant == LOCAL_TENANT else tenant


@functools.lru_cache(maxsize=256)
def load_spec(file: FlowFile) -> FlowSpec:
    """A flow file's spec, parsed once per version of the file (parsing YAML took 5 ms of a 40 ms search)."""
    return FlowSpec.load(Path(file.path))


@functools.lru_cache(maxsize=None)
def _reads_documents(builtin: str) -> bool:
    """Whether the built-in flow ``builtin`` starts from a source step (``ingest``'s flows)."""
    built = FlowSpec.load(flow_store.builtin_path(builtin)).build()
    return any(built.operators[step].scope == "source" for step in built.needed_steps())


class FlowResolution:
    """Flows by name and tenant, and the spec a request runs; what it reads is the service's."""

    index_roots: list[str]
    data_roots: list[str]
    default_index: str | None
    indices: "Indices"
    served: list[dict[str, Any]]
    app_name: str

    def flow_path(self, name: str, tenant: str) -> Path | None:
        return flow_store.builtin_path(name) or flow_store.saved_path(name, flow_owner(tenant))

    def flow_file(self, name: str, tenant: str) -> FlowFile | None:
        """The file of the flow ``name`` (built-in, else the tenant's saved one) and its version, None when there is
        none: a cache key, since a saved flow changes over HTTP (``PUT /flows/{name}``) while the app serves."""
        path = self.flow_path(name, tenant)
        if path is None:
            return None
        try:
            stat = path.stat()
        except FileNotFoundError:  # deleted since it was found (a DELETE /flows/{name} at the same time)
            return None
        return FlowFile(str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def flow_spec(self, name: str, tenant: str) -> FlowSpec | None:
        """The spec of the flow ``name`` (built-in, else the tenant's saved one); None when there is none, also when
        its file is deleted while it is read: a concurrent ``DELETE /flows/{name}`` makes it a flow that is not
        there, never an error naming the server's path (or a 500)."""
        file = self.flow_file(name, tenant)
        if file is None:
            return None
        try:
            return load_spec(file)
        except SpecError:
            if Path(file.path).is_file():
                raise
            return None

    def resolve_flow(self, flow: str | dict[str, Any], tenant: str, *, search: bool = False) -> FlowSpec:
        """``flow``'s spec; a name that names none is refused with the closest names and the flows there are (for a
        search, the built-in ones that search: not ``ingest``'s, which read documents and a search refuses)."""
        if isinstance(flow, dict):
            return FlowSpec.parse(flow)
        if not flow.strip():  # no name at all (a page that sent its flow choice before the list came): no list of all
            raise SpecError("the flow is empty: name a built-in or saved flow (GET /flows lists them), send an inline "
                            "spec, or leave `flow` out for the default, hybrid", field="flow")
        spec = self.flow_spec(flow, tenant)
        if spec is None:
            saved = flow_store.saved_names(flow_owner(tenant))
            builtin = [name for name in flow_store.builtin_names() if not (search and _reads_documents(name))]
            raise SpecError(f"no flow named '{one_line(flow, 60)}'{flow_store.did_you_mean(flow, builtin + saved)} "
                            f"(built-in: {', '.join(builtin)}; saved: {', '.join(saved) or 'none'})", field="flow")
        return spec

    def runnable_spec(self, asked: Asked, tenant: str) -> FlowSpec:
        """The spec that runs: cut to ``top_k``, its unset indices set, every index and file it names confined to
        the roots, its steps placed on this app's deployments; a 403 for another key's unshared index."""
        spec = asked.spec
        if asked.top_k is not None:
            spec = with_top_k(spec, asked.top_k, asked.built)
        spec = self.place(confine_spec(self.with_index(spec, asked.index, tenant), self.index_roots,
                                       self.data_roots))
        self.indices.refuse_unshared(spec, tenant, asked.index)
        refuse_missing_indices(spec)
        return spec

    def default_index_missing(self) -> bool:
        """Whether the app names a default index that holds no index yet (``make demo`` makes the sample one): a
        search naming none is then a 503, ``/healthz`` says ``missing`` and the warm-up warns of it."""
        return bool(self.default_index) and not (Path(self.default_index) / "manifest.json").is_file()

    def with_index(self, spec: FlowSpec, index: str | None, tenant: str | None = None) -> FlowSpec:
        """``spec`` with its unset indices set to the request's ``index`` (confined to the roots) or the default.
        With ``tenant``, an index the service made is checked first (``Indices.check_asked``)."""
        path = confine(index, self.index_roots, "index") if index else self.default_index
        if index and tenant is not None:
            self.indices.check_asked(Path(path), tenant)
        unset = spec.unset_index_steps()
        if not unset:
            return spec
        step = next(iter(unset))
        if not path:
            raise SpecError("this step reads an index and neither the request (`index`) nor the app "
                            "(args.service.default_index) names one", step=step, field="params.index")
        if not index and self.default_index_missing():  # the server's setting, not the request's
            raise ApiError(503, "the service's default index (args.service.default_index) holds no index yet: name "
                           "an index in the request (`index`; GET /v1/indices lists them), or ingest the default "
                           "one (tessera ingest --source FILE --index, the default index's path)", param="index",
                           kind="server_error", code="default_index_missing")
        if not Path(path).is_dir():
            raise SpecError(f"index '{index}' does not exist (GET /v1/indices lists the indices)", step=step,
                            field="index")
        if not (Path(path) / "manifest.json").is_file():  # a folder under the roots, such as the roots themselves
            from operators.store.layout import committed_looking_shards

            if shards := committed_looking_shards(Path(path)):  # named without the server's path
                raise SpecError(f"index '{index}' holds {len(shards)} shard folder(s) but its "
                                "manifest.json is lost: the index is damaged until the manifest is restored",
                                step=step, field="index")
            raise SpecError(f"'{index}' is a folder but no index (it has no manifest.json); "
                            "GET /v1/indices lists the indices", step=step, field="index")
        return spec.with_index(path)

    def place(self, spec: FlowSpec) -> FlowSpec:
        """Steps whose model a deployment of this app serves run on it (``served_models.placed``)."""
        return placed(spec, self.served, self.app_name)


def refuse_missing_indices(spec: FlowSpec) -> None:
    """The 422 of the first step param that names an index that is not there, as the request's ``index`` is refused
    (``with_index``). Run, its retriever failed, and the search answered a 404 saying that the index was deleted
    while the flow ran; one there but damaged is the run's to say."""
    for step, field, index in index_params(spec):
        if not Path(index).exists():
            raise SpecError(f"index '{Path(index).name}' does not exist (GET /v1/indices lists the indices)",
                            step=step, field=f"steps.{step}.{field}")
