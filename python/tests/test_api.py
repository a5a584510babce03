"""The Python API against the CLI: every function, the error path, a Hugging Face config dict,
pandas, and byte-for-byte agreement with the CLI's JSON for the same inputs."""

import json

import pytest

import meshplan

LLAMA_70B = dict(model="llama3.1-70b", gpu="h100-sxm", gpus=64, seq_len=8192, global_batch=128)



def test_estimate_equals_the_cli_json_for_the_same_inputs(cli):
    result = meshplan.estimate(**LLAMA_70B, tp=8, pp=4, sequence_parallel=True)
    code, out, err = cli(
        "estimate", "--model", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "64",
        "--seq-len", "8192", "--global-batch", "128", "--tp", "8", "--pp", "4",
        "--sequence-parallel=true", "--format", "json",
    )
    assert code == 0, err
    assert result.to_dict() == json.loads(out)
    # Twice the same input, the same result.
    again = meshplan.estimate(**LLAMA_70B, tp=8, pp=4, sequence_parallel=True)
    assert again.to_dict() == result.to_dict()


def test_the_stacks_recipe_is_a_switch(cli):
    run = dict(
        model="gpt-oss-120b", gpu="gb300", gpus=64, stack="nemo-26.08", precision="mxfp8", ep=16,
        micro_batch=4, global_batch=1280, seq_len=4096,
    )
    result = meshplan.estimate(**run, recipe=True)
    code, out, err = cli(
        "estimate", "--model", "gpt-oss-120b", "--gpu", "gb300", "--gpus", "64", "--stack",
        "nemo-26.08", "--precision", "mxfp8", "--ep", "16", "--micro-batch", "4",
        "--global-batch", "1280", "--seq-len", "4096", "--recipe", "--format", "json",
    )
    assert code == 0, err
    assert result.to_dict() == json.loads(out)
    assert "whole-iteration CUDA graph" in result.run.recipe
    assert "recipe" not in meshplan.estimate(**run, recipe=False).run.to_dict()


def test_the_built_in_example_matches_the_cli(cli):
    code, out, err = cli("estimate", "--format", "json")
    assert code == 0, err
    assert meshplan.estimate().to_dict() == json.loads(out)


def test_an_estimate_reads_as_attributes():
    result = meshplan.estimate(**LLAMA_70B, tp=8, pp=4)
    assert result.step_time_s == result.time.step_time_s > 0
    assert 0 < result.mfu_pct < 100
    assert result.peak_memory_gib == result.memory.total_gib
    assert result.fits is result.memory.fits
    breakdown = result.memory.breakdown_gib
    assert breakdown.weights > 0 and breakdown.activations > 0
    assert result.run.plan.tp == 8
    assert "<table>" in result._repr_html_()
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        result.nope
    import copy

    assert copy.deepcopy(result.memory).to_dict() == result.memory.to_dict()


def test_bad_input_raises_every_problem_at_once():
    with pytest.raises(meshplan.InputError) as caught:
        meshplan.estimate(model="llama3.1-8b", gpus=-3, tp=5, seq_len=0)
    fields = {problem["field"] for problem in caught.value.problems}
    assert {"cluster.num_gpus", "training.seq_len"} <= fields, caught.value.problems
    for problem in caught.value.problems:
        assert set(problem) == {"field", "value", "message", "hint"}
        assert problem["hint"]
    assert isinstance(caught.value, ValueError)


def test_an_unknown_preset_and_a_malformed_flag_are_input_errors():
    with pytest.raises(meshplan.InputError) as caught:
        meshplan.estimate(model="no-such-model")
    assert caught.value.problems[0]["field"] == "model"
    with pytest.raises(meshplan.InputError) as caught:
        meshplan.estimate(schedule="sideways")
    assert caught.value.problems[0]["field"] == "arguments"


def test_a_hugging_face_config_dict_is_a_model(cli, tmp_path):
    config = {
        "_name_or_path": "meta-llama/Llama-3.1-8B",
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
    }
    result = meshplan.estimate(model=config, gpus=8, seq_len=8192, global_batch=32)
    assert result.run.model == "Llama-3.1-8B"
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    code, out, err = cli(
        "estimate", "--model", str(folder / "config.json"), "--gpus", "8", "--seq-len", "8192",
        "--global-batch", "32", "--format", "json",
    )
    assert code == 0, err
    assert result.to_dict() == json.loads(out)


def test_simulate_runs_the_schedule():
    result = meshplan.simulate(**LLAMA_70B, tp=8, pp=4, vp=2)
    assert result.schedule and result.step_time_s > 0
    assert len(result.stages) == 4


def test_search_finds_a_plan_and_exports_it(cli):
    found = meshplan.search(model="llama3.1-8b", gpu="h100-sxm", gpus=64, seq_len=8192,
                            global_batch=128, top=3, report=True)
    assert 1 <= len(found.plans) <= 3
    assert found.best.rank == 1 and found.considered >= found.priced > 0
    assert "[plan]" in found.plan_toml
    assert "<html" in found._repr_html_().lower()
    code, out, err = cli(
        "search", "--model", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "64",
        "--seq-len", "8192", "--global-batch", "128", "--top", "3", "--format", "json",
    )
    assert code == 0, err
    assert found.to_dict() == json.loads(out)
    assert "--tensor-model-parallel-size" in meshplan.export(found)
    # A plan searched for torchtitan exports as its job config.
    titan = meshplan.search(model="llama3.1-8b", gpu="h100-sxm", gpus=64, seq_len=8192,
                            global_batch=128, top=1, engine="torchtitan")
    assert "[parallelism]" in meshplan.export(titan, engine="torchtitan")
    with pytest.raises(meshplan.InputError, match="not by the plan's engine"):
        meshplan.export(found, engine="torchtitan")
    arguments = meshplan.export(meshplan.estimate(**LLAMA_70B, tp=8, pp=4), engine="megatron")
    assert "--tensor-model-parallel-size 8" in arguments


def test_a_search_becomes_a_data_frame():
    pandas = pytest.importorskip("pandas")
    found = meshplan.search(model="llama3.1-8b", gpu="h100-sxm", gpus=64, seq_len=8192,
                            global_batch=128, top=4)
    frame = found.to_pandas()
    assert "<table>" in found._repr_html_()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == len(found.plans)
    assert {"rank", "step_time_s", "plan.tp", "plan.pp"} <= set(frame.columns)
    assert list(frame["rank"]) == sorted(frame["rank"])


def test_presets_are_listed():
    models = meshplan.models()
    assert "llama3.1-405b" in {model.name for model in models}
    assert all(gpu.bf16_tflops > 0 for gpu in meshplan.gpus())
    assert meshplan.stacks()


def test_validate_reports_out_of_sample_accuracy_first(root):
    report = meshplan.validate(root / "data" / "calibration" / "runs.csv")
    assert report.summary.predicted > 400
    assert report.rows[0].row_id == "1"


def test_ctrl_c_interrupts_a_long_search():
    import signal
    import subprocess
    import sys
    import time

    # A runner that starts the suite in the background leaves SIGINT ignored, and a child
    # inherits that; Python then installs no KeyboardInterrupt handler. The child restores it.
    script = (
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import meshplan\n"
        "print('started', flush=True)\n"
        "while True:\n"
        "    meshplan.search(model='deepseek-v3', gpu='h100-sxm', gpus=8192, seq_len=4096,"
        " global_batch=8192)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "started"
    time.sleep(0.5)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    waited = time.monotonic() - sent
    assert "KeyboardInterrupt" in err, err
    assert waited < 1.0, f"took {waited:.2f} s to stop"


def test_a_model_toml_path_prices_as_its_preset(root):
    by_path = meshplan.estimate(model=root / "presets" / "models" / "llama3.1-8b.toml", gpus=8)
    by_name = meshplan.estimate(model="llama3.1-8b", gpus=8)
    assert by_path.step_time_s == by_name.step_time_s
    assert by_path.memory.to_dict() == by_name.memory.to_dict()
