"""serve/config.yaml and the application builder's arguments, without starting Serve."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from operators.models import ModelNotFoundError
from serve.app import ServeConfigError, build_app, check_model, parse_args


@pytest.fixture(scope="module")
def config(repo_root) -> dict:
    return yaml.safe_load((repo_root / "serve" / "config.yaml").read_text(encoding="utf-8"))


def test_config_file_is_a_valid_serve_config_with_its_models(config):
    from ray.serve.schema import ServeDeploySchema

    schema = ServeDeploySchema.model_validate(config)
    (app,) = schema.applications
    assert app.import_path == "serve.app:build_app"
    args = parse_args(app.args)
    by_name = {m.name: m for m in args.models}
    assert by_name["all-MiniLM-L6-v2"].op == "embed.sentence_transformer"
    assert by_name["tessera-cross-encoder"].params["model"] == "tessera-cross-encoder"
    assert by_name["tessera-colbert"].op == "rerank.colbert"
    assert by_name["tessera-colbert"].params["model"] == "tessera-colbert"
    assert by_name["minilm-rerank"].op == "rerank.embedding"  # reranks on a fresh install: nothing to train


def test_one_replica_of_every_model_fits_the_two_cores_every_user_has(config):
    """Serve places a replica only where its num_cpus is free: a config asking for more than 2 CPUs left the
    language model unplaced on a 2-core machine, and the service never healthy."""
    args = parse_args(config["applications"][0]["args"])
    reserved = {m.name: m.autoscaling.min_replicas * m.num_cpus for m in args.models}
    reserved |= {llm.name: llm.autoscaling.min_replicas * (llm.threads if llm.num_cpus is None else llm.num_cpus)
                 for llm in args.llms}
    reserved["api"] = args.api_num_cpus
    assert sum(reserved.values()) <= 2, reserved


def test_config_file_builds_with_what_exists(config, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))  # no trained models here: the cross-encoder is missing
    models = config["applications"][0]["args"]["models"]
    kinds = {m["name"]: check_model(parse_args({"models": [m]}).models[0]) for m in models}
    assert kinds["all-MiniLM-L6-v2"] == ("embedding", None, None)
    assert kinds["minilm-rerank"] == ("rerank", None, None)
    kind, _, reason = kinds["tessera-cross-encoder"]
    assert kind == "rerank" and "tessera-cross-encoder" in reason and "tessera train" in reason
    assert kinds["tessera-colbert"][0] == "rerank" and kinds["tessera-colbert"][1] is not None
    assert build_app(config["applications"][0]["args"]) is not None


def test_missing_models_fail_stops_the_build_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    args = {"missing_models": "fail", "models": [
        {"name": "tessera-cross-encoder", "op": "rerank.cross_encoder", "params": {"model": "tessera-cross-encoder"}}]}
    with pytest.raises(ModelNotFoundError, match="model 'tessera-cross-encoder' is not"):
        build_app(args)


def test_a_bi_encoder_deployed_as_a_cross_encoder_is_skipped_with_the_reason(tmp_path, monkeypatch):
    """A replica would fail at start on it (no classification head); the build says why instead."""
    import shutil

    from operators.models import resolve_model_path

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), tmp_path / "models" / "tessera-cross-encoder")
    args = parse_args({"models": [{"name": "tessera-cross-encoder", "op": "rerank.cross_encoder",
                                   "params": {"model": "tessera-cross-encoder"}}]})
    kind, problem, reason = check_model(args.models[0])
    assert kind == "rerank" and problem.startswith(f"not a cross-encoder: {tmp_path / 'models'}")
    assert reason.startswith("not a cross-encoder: 'tessera-cross-encoder' has no sequence-classification head")


@pytest.mark.parametrize("args, field", [
    ({"models": [{"name": "m", "op": "embed.sentence_transformer", "colour": 1}]}, "models.0.colour"),
    ({"models": [{"name": "m", "op": "embed.sentence_transformer", "batching": {"max_batch_size": 0}}]},
     "models.0.batching.max_batch_size"),
    ({"models": [{"name": "m", "op": "embed.sentence_transformer",
                  "autoscaling": {"min_replicas": 3, "max_replicas": 2}}]}, "models.0.autoscaling"),
    ({"models": [{"name": "a b", "op": "embed.sentence_transformer"}]}, "models.0"),
    ({"models": [{"name": "m", "op": "embed.sentence_transformer"}, {"name": "m", "op": "rerank.cross_encoder"}]},
     "models"),
    ({"models": [{"name": "m", "op": "analyze.word_count"}]}, "models.m.op"),
    ({"models": [{"name": "m", "op": "embed.sentence_transformer", "params": {"normalise": True}}]},
     "models.m.params.normalise"),
])
def test_bad_builder_args_name_the_field(args, field):
    with pytest.raises(ServeConfigError) as err:
        build_app(args)
    assert err.value.field == field


def test_a_step_placement_is_validated_with_the_spec():
    from flows.spec import FlowSpec
    from operators.errors import SpecError

    spec = FlowSpec.parse({"steps": {"ce": {"op": "rerank.cross_encoder",
                                             "placement": {"deployment": "tessera-cross-encoder"}}}})
    assert spec.steps["ce"].placement.app == "tessera"
    with pytest.raises(SpecError) as err:
        FlowSpec.parse({"steps": {"ce": {"op": "rerank.cross_encoder", "placement": {"deploy": "x"}}}})
    assert err.value.step == "ce" and err.value.field.startswith("steps.ce.placement")


@pytest.mark.process
def test_a_placed_step_without_ray_fails_naming_step_and_deployment(repo_root):
    code = (
        "from flows.executors.local import LocalExecutor\n"
        "from flows.spec import FlowSpec\n"
        "from operators.testing import sample_results\n"
        "spec = FlowSpec.parse({'steps': {'ce': {'op': 'rerank.cross_encoder',"
        " 'placement': {'deployment': 'tessera-cross-encoder'}}}})\n"
        "LocalExecutor().run(spec, sample_results(1, 2))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "PlacementError" in last and "step 'ce'" in last and "tessera/tessera-cross-encoder" in last
    assert "not connected to Ray" in last


def test_the_ray_data_executor_refuses_a_placed_step_naming_it():
    from flows.executors.ray_data import RayDataExecutor
    from flows.spec import FlowSpec
    from operators.errors import SpecError
    from operators.testing import sample_results

    spec = FlowSpec.parse({"steps": {"ce": {"op": "rerank.cross_encoder",
                                             "placement": {"deployment": "tessera-cross-encoder"}}}})
    with pytest.raises(SpecError, match="local executor") as err:
        RayDataExecutor().run(spec, sample_results(1, 2))  # refused before Ray is started
    assert err.value.step == "ce" and err.value.field == "placement"


# -- GPUs: decided by the config, never by what the cluster has at build time --------


@pytest.fixture(params=[{"CPU": 4}, {"CPU": 4, "GPU": 2}], ids=["cluster-without-gpus", "cluster-with-gpus"])
def cluster_now(request, monkeypatch):
    """Ray reporting these resources while the app is built (a GPU worker group at zero shows none)."""
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: dict(request.param))
    return request.param


@pytest.mark.parametrize("num_gpus, wanted", [(None, 0.0), (0, 0.0), (1, 1.0), (0.5, 0.5)])
def test_a_replica_asks_for_the_configured_gpus_whatever_the_cluster_has_now(cluster_now, num_gpus, wanted):
    from serve.app import deployment_options

    entry = {"name": "m", "op": "embed.sentence_transformer", **({} if num_gpus is None else {"num_gpus": num_gpus})}
    options = deployment_options(parse_args({"models": [entry]}).models[0])
    assert options["ray_actor_options"] == {"num_cpus": 1, "num_gpus": wanted}


def test_num_gpus_auto_is_refused_with_what_to_write_instead():
    with pytest.raises(ServeConfigError, match="set 1 for GPU replicas") as err:
        parse_args({"models": [{"name": "m", "op": "embed.sentence_transformer", "num_gpus": "auto"}]})
    assert err.value.field == "models.0.num_gpus"


def test_the_config_file_asks_for_no_gpu_it_does_not_name(config, cluster_now):
    from serve.app import deployment_options

    for model in parse_args(config["applications"][0]["args"]).models:
        assert deployment_options(model)["ray_actor_options"]["num_gpus"] == 0, model.name


def test_config_file_serves_the_embedded_language_model(config):
    args = parse_args(config["applications"][0]["args"])
    (llm,) = args.llms
    assert llm.name == "smollm2" and llm.engine == "llama_cpp" and "local" in llm.aliases
    assert llm.autoscaling.max_replicas >= 2  # concurrency on CPU is replicas (one sequence each)


def test_a_vllm_model_without_vllm_is_missing_with_the_install_line():
    from serve.deployments.llm import engine_problem

    (llm,) = parse_args({"llms": [{"name": "q", "engine": "vllm", "model": "Qwen/Qwen2.5-0.5B-Instruct"}]}).llms
    problem, reason = engine_problem(llm)
    assert "tessera[gpu]" in problem and reason == problem  # (no path in it)
    with pytest.raises(ModelNotFoundError, match="tessera\\[gpu\\]"):
        build_app({"missing_models": "fail", "llms": [llm.model_dump()], "service": None})



def test_a_llama_cpp_model_without_llama_cpp_is_missing_with_the_pip_line(monkeypatch):
    """It said "make demo installs it", which a user of an installed wheel cannot run."""
    import sys

    from operators.llm.embedded_model import ENGINE_REQUIREMENT
    from serve.deployments.llm import engine_problem

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # hidden as Python hides a module
    (llm,) = parse_args({"llms": [{"name": "smollm2"}]}).llms
    problem, reason = engine_problem(llm)
    assert f"pip install {ENGINE_REQUIREMENT}" in problem and "make demo" not in problem and reason == problem

@pytest.mark.parametrize("args, field", [
    ({"llms": [{"name": "m", "engine": "tgi"}]}, "llms.0.engine"),
    ({"llms": [{"name": "m", "threads": 0}]}, "llms.0.threads"),
    ({"llms": [{"name": "minilm"}], "models": [{"name": "minilm", "op": "embed.sentence_transformer"}]}, "args"),
])
def test_bad_llm_args_name_the_field(args, field):
    with pytest.raises(ServeConfigError) as err:
        build_app(args)
    assert err.value.field == field


@pytest.mark.parametrize("keys", [" , ", "short-key"])
def test_a_set_but_unusable_tessera_api_keys_stops_a_plain_serve_run_build(keys, tmp_path, monkeypatch):
    """``serve run serve/config.yaml`` (no ``tessera serve`` in front) refuses what ``tessera serve`` refuses."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.setenv("TESSERA_API_KEYS", keys)
    with pytest.raises(ServeConfigError) as err:
        build_app({"models": [], "service": {"task_store": f"sqlite:///{tmp_path / 'tasks.db'}"}})
    assert err.value.field == "TESSERA_API_KEYS"


@pytest.mark.parametrize("args, field, said", [
    ({"missing_modles": "skip"}, "missing_modles", "did you mean 'missing_models'?"),
    ({"service": {"index_root": ["/srv"]}}, "service.index_root", "did you mean 'index_roots'?"),
    ({"service": {"limits": {"max_task_per_key": 2}}}, "service.limits.max_task_per_key",
     "did you mean 'max_tasks_per_key'?"),
    ({"max_tasks": 3}, "max_tasks", "'max_tasks' is a setting of args.service.limits: move it there"),
    ({"api_keys": []}, "api_keys", "'api_keys' is a setting of args.service: move it there"),
    ({"llms": [{"name": "m", "thread": 2}]}, "llms.0.thread", "did you mean 'threads'?"),
])
def test_unknown_setting_says_what_to_write(args, field, said):
    """A misspelt setting, or one in the wrong section, names the right name or the section it belongs to: the bare
    "unknown field" left the operator to look both up."""
    with pytest.raises(ServeConfigError) as err:
        parse_args(args)
    assert err.value.field == field
    assert said in err.value.message


@pytest.mark.parametrize("digest, said", [("abc", "this is 3 characters"),
                                          ("tessera_" + "x" * 43, "this is a raw key, not its hash"),
                                          ("A" * 64, "this is in capitals")])
def test_a_key_entry_without_a_hash_says_how_to_get_one(digest, said):
    """pydantic said "String should match pattern '^[0-9a-f]{64}$'"; a raw key pasted as the hash is not echoed."""
    with pytest.raises(ServeConfigError) as err:
        parse_args({"service": {"api_keys": [{"id": "alice", "sha256": digest}]}})
    assert err.value.field == "service.api_keys.0.sha256"
    assert said in err.value.message and "tessera keys id KEY" in err.value.message
    assert "(key 'alice')" in err.value.message and "x" * 43 not in err.value.message


@pytest.mark.parametrize("name, place", [("host", "http_options"), ("port", "http_options"),
                                         ("route_prefix", "the application (beside args)")])
def test_a_serve_setting_under_args_says_where_it_goes(name, place):
    """``host: 0.0.0.0`` put under ``args`` said "unknown field" and listed the app's arguments, none of them it."""
    with pytest.raises(ServeConfigError) as err:
        parse_args({name: 1})
    assert f"'{name}' is Serve's setting of {place}, not an argument of the app: move it there" in err.value.message
