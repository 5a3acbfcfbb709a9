"""The boltzoo command line."""

import json

import pytest

import boltzoo
from boltzoo.cli import main


def test_eval_oracle_prints_full_success(capsys):
    assert (
        main(["eval", "math-v0", "--policy", "oracle", "--episodes", "20", "--json", "--quiet"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 20 and summary["failed"] == 0


def test_eval_naive_is_worse_than_oracle_and_takes_env_args(capsys):
    main(
        [
            "eval",
            "math-v0",
            "--policy",
            "naive",
            "--json",
            "--quiet",
            "-e",
            "level=medium",
            "-e",
            'agents=["solver","verifier"]',
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] > 150 and summary["success_rate"] < 0.5


def test_unknown_env_is_a_one_line_error(capsys):
    assert main(["eval", "nope-v0", "--quiet"]) == 2
    assert "no boltzoo env 'nope-v0'" in capsys.readouterr().err


@pytest.mark.slow
def test_serve_answers_chat_completions_over_http(tmp_path, smollm2_tokenizer):
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    from boltzoo.agents.models import tiny_model

    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(tmp_path)
    smollm2_tokenizer.save_pretrained(tmp_path)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "boltzoo.cli",
            "serve",
            "--model",
            str(tmp_path),
            "--port",
            "0",
            "--max-new-tokens",
            "4",
            "--record-to",
            str(tmp_path / "calls.jsonl"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert "serving" in line and "http://127.0.0.1:" in line
        base_url = line.split(" at ")[1].split()[0]
        request = urllib.request.Request(
            base_url + "/chat/completions",
            data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        started = time.time()
        with urllib.request.urlopen(request, timeout=60) as response:
            body = json.loads(response.read())
        assert 1 <= len(body["choices"][0]["token_ids"]) <= 4 and time.time() - started < 60
        server.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop
        assert server.wait(timeout=60) == 0  # a clean stop takes about 2 s
        [record] = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
        assert record["completion"]["response_token_ids"] == body["choices"][0]["token_ids"]
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


@pytest.mark.parametrize("framework", ["autogen", "openai-agents", "langgraph"])
@pytest.mark.slow
def test_eval_runs_the_bundled_framework_agents_through_the_gateway(
    tmp_path, smollm2_tokenizer, capsys, framework
):
    from boltzoo.agents.models import tiny_model

    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(tmp_path)
    smollm2_tokenizer.save_pretrained(tmp_path)
    code = main(
        [
            "eval",
            "math-v0",
            "--policy",
            framework,
            "--model",
            str(tmp_path),
            "--episodes",
            "4",
            "--max-new-tokens",
            "8",
            "--temperature",
            "1",  # greedy decoding of a random tiny model writes only blanks, which the SDK rejects
            "--json",
            "--quiet",
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["episodes"] == 4 and summary["failed"] == 0
    assert summary["tokens_per_second"] > 0  # the framework's LLM calls came through the gateway


@pytest.mark.slow
def test_eval_runs_the_paper_sql_graph_node_by_node(tmp_path, smollm2_tokenizer, capsys):
    pytest.importorskip("langgraph")
    from boltzoo.agents.models import tiny_model

    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(tmp_path)
    smollm2_tokenizer.save_pretrained(tmp_path)
    common = ["eval", "sql-v0", "--policy", "langgraph-sql-graph", "--model", str(tmp_path)]
    common += ["--episodes", "3", "--max-new-tokens", "8", "--temperature", "1", "--quiet"]
    out = tmp_path / "episodes.jsonl"
    code = main([*common, "-e", 'agents=["writer"]', "-e", "schema_rows=0", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["episodes"] == 3 and summary["failed"] == 0
    assert summary["policy"] == f"langgraph-sql-graph:{tmp_path}"
    # the graph plays the env's one agent: one step an episode, two or more calls behind it
    assert summary["steps"] == 3
    main(
        ["rollout", *common[1:], "-e", 'agents=["writer"]', "-e", "schema_rows=0"]
        + ["--out", str(out)]
    )
    capsys.readouterr()
    episodes = [json.loads(line) for line in out.read_text().splitlines()]
    nodes = [[c["node"] for c in e["steps"][0]["action"]["inner_calls"]] for e in episodes]
    assert all(n[:2] == ["writer", "checker"] for n in nodes)

    with pytest.raises(ValueError, match="agents=\\['writer'\\]"):  # the team is refused
        main(common)


@pytest.mark.slow
def test_oracle_answers_only_the_graph_nodes_it_names(tmp_path, smollm2_tokenizer, capsys):
    # --oracle checker: the model writes and rewrites, the env's oracle checks, so the
    # checker's demonstrations are verdicts on the model's own queries.
    pytest.importorskip("langgraph")
    from boltzoo.agents.models import tiny_model

    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(tmp_path)
    smollm2_tokenizer.save_pretrained(tmp_path)
    common = ["sql-v0", "--policy", "langgraph-sql-graph", "--model", str(tmp_path)]
    common += ["-e", 'agents=["writer"]', "-e", "schema_rows=0", "--max-new-tokens", "8"]
    out = tmp_path / "demos.jsonl"
    assert (
        main(["rollout", *common, "--oracle", "checker", "--episodes", "3", "--out", str(out)]) == 0
    )
    capsys.readouterr()
    calls = [
        c
        for line in out.read_text().splitlines()
        for c in json.loads(line)["steps"][0]["action"]["inner_calls"]
    ]
    by_node = {
        node: [c["text"] for c in calls if c["node"] == node]
        for node in ("writer", "checker", "rewriter")
    }
    # the tiny model's 8 tokens are no right query: the oracle rejects each, the model rewrites
    assert len(by_node["writer"]) == 3 and len(by_node["rewriter"]) >= 3
    assert by_node["checker"] and all(
        t.startswith("VERDICT: INCORRECT - ") for t in by_node["checker"]
    )
    # (the oracle's answers are verdicts or ```sql blocks; the model's are its own tokens)
    model_texts = by_node["writer"] + by_node["rewriter"]
    assert not any(t.startswith(("VERDICT", "```sql")) for t in model_texts)
    assert (
        main(["eval", *common, "--oracle", "checker", "--episodes", "1", "--json", "--quiet"]) == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["policy"] == f"langgraph-sql-graph:{tmp_path}+oracle(checker)"

    assert main(["eval", *common, "--oracle", "judge", "--episodes", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--oracle 'judge'" in err and "writer, checker, rewriter" in err and "\n" not in err


@pytest.mark.slow
def test_train_runs_checkpoints_and_a_larger_steps_extends_the_resumed_run(
    tmp_path, smollm2_tokenizer, capsys
):
    from boltzoo.agents.models import tiny_model

    model_dir, run = tmp_path / "model", tmp_path / "run"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model_dir)
    smollm2_tokenizer.save_pretrained(model_dir)
    common = [
        "--output-dir",
        str(run),
        "--tasks-per-step",
        "2",
        "--group-size",
        "2",
        "--max-new-tokens",
        "4",
        "--progress",
        "false",
        "--save-every",
        "2",
    ]
    env_kwargs = json.dumps({"vocab_size": len(smollm2_tokenizer), "target_size": 3000})
    assert (
        main(
            [
                "train",
                "tokens-v0",
                "--model",
                str(model_dir),
                "--env-kwargs",
                env_kwargs,
                "--steps",
                "2",
                "--lr",
                "0.01",
                *common,
            ]
        )
        == 0
    )
    assert (run / "checkpoints" / "latest").read_text().strip() == "step-000002"
    assert main(["train", "tokens-v0", "--resume", "--steps", "3", *common]) == 0
    saved = json.loads((run / "config.json").read_text())
    assert saved["steps"] == 3 and saved["lr"] == 0.01 and saved["model"] == str(model_dir)
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    assert "step 3: reward" in capsys.readouterr().out


def test_eval_of_part_of_a_split_plays_tasks_spread_over_it(capsys, monkeypatch):
    # sql-v0's test split is ordered by database: its first 8 tasks are all from one
    import boltzoo.cli as cli
    from boltzoo.lightningrl.rollout import rollout

    played = []

    def recording_rollout(*args, tasks, **kwargs):
        played.extend(tasks)
        return rollout(*args, tasks=tasks, **kwargs)

    monkeypatch.setattr(cli, "rollout", recording_rollout)
    assert main(["eval", "sql-v0", "--policy", "oracle", "--episodes", "8", "--quiet"]) == 0
    env = boltzoo.make("boltzoo/sql-v0", split="test").unwrapped
    assert len(set(played)) == 8
    assert len({env.tasks[i].db_id for i in played}) > 1
    assert len({env.tasks[i].db_id for i in range(8)}) == 1  # what the head alone would give


@pytest.mark.slow
def test_rollout_records_demonstrations_that_sft_learns_and_export_writes(
    tmp_path, smollm2_tokenizer, capsys
):
    from boltzoo.agents.models import tiny_model
    from boltzoo.episode import load_episodes

    model_dir, demos, run = tmp_path / "model", tmp_path / "demos.jsonl", tmp_path / "sft"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model_dir)
    smollm2_tokenizer.save_pretrained(model_dir)
    args = ["rollout", "math-v0", "--episodes", "6", "--out", str(demos), "--quiet"]
    assert main([*args, "-e", "level=medium"]) == 0
    episodes = load_episodes(demos)
    assert len(episodes) == 6 and all(e.success for e in episodes)
    assert {e.episode_id for e in episodes} == {e.episode_id for e in load_episodes(demos)}
    assert all(e.metadata["prompts"]["solver"] for e in episodes)
    assert "wrote 6 episodes" in capsys.readouterr().out

    sft = ["sft", "math-v0", "--model", str(model_dir), "--demos", str(demos)]
    flags = ["--output-dir", str(run), "--eval-tasks", "2", "--max-new-tokens", "4"]
    assert main([*sft, *flags, "--only-successful", "--lora-r", "4", "--progress", "false"]) == 0
    out = capsys.readouterr().out
    assert "SFT on 12 calls from 6 demonstrations" in out and "held-out success" in out
    saved = json.loads((run / "config.json").read_text())
    assert saved["only_successful"] is True and saved["demos"] == [str(demos)]
    assert main(["export", str(run), str(tmp_path / "exported")]) == 0
    assert (tmp_path / "exported" / "model.safetensors").exists()
    # a second run into the same folder is refused, in one line
    assert main([*sft, *flags]) == 2
    assert "holds a run" in capsys.readouterr().err


def test_string_flags_are_taken_as_written_and_json_flags_parsed():
    from boltzoo.cli import _given_config, build_parser
    from boltzoo.lightningrl.config import TrainerConfig

    args = build_parser().parse_args(
        ["train", "math-v0", "--output-dir", "2024", "--ray-address", "10.0.0.1:6379",
         "--estimator", "reinforce++", "--policy-map", '{"solver": "p"}', "--steps", "3",
         "--replay-demos", "demos.jsonl"]
    )  # fmt: skip
    config = TrainerConfig(**_given_config(args, TrainerConfig))
    assert config.output_dir == "2024" and config.ray_address == "10.0.0.1:6379"
    assert config.replay_demos == ["demos.jsonl"]
    assert config.estimator == "reinforce++" and config.policy_map == {"solver": "p"}
    assert config.steps == 3


def test_eval_by_a_task_field_gives_success_per_value_hardest_first(capsys):
    # math-v0's naive policy solves a medium template now and then: the breakdown must add up
    # to the overall figures and name every value of the field among the played tasks
    from boltzoo.registration import make
    from boltzoo.rollout import evaluation_tasks

    args = ["eval", "math-v0", "--policy", "naive", "--episodes", "60", "-e", "level=medium"]
    assert main([*args, "--quiet", "--by", "template", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = summary["by"]["template"]
    env = make("boltzoo/math-v0", split="test", level="medium").unwrapped
    played = evaluation_tasks(env.num_tasks, 60)
    assert set(rows) == {env.tasks[i].template for i in played}
    assert sum(row["episodes"] for row in rows.values()) == 60
    solved = sum(row["success_rate"] * row["episodes"] for row in rows.values())
    assert 0 < solved == pytest.approx(summary["success_rate"] * 60)
    rates = [row["success_rate"] for row in rows.values()]
    assert rates == sorted(rates) and rates[0] < rates[-1]

    assert main([*args, "--quiet", "--by", "level"]) == 0  # a header, then a line per value
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["level", "episodes", "success"]
    assert lines[2].split() == ["medium", "60", f"{summary['success_rate']:.1%}"]


def test_eval_by_info_groups_episodes_by_their_last_info(capsys):
    # grouped by the info "success" itself, every right episode must land under True and every
    # wrong one under False; the groups add up to the whole
    args = ["eval", "math-v0", "--policy", "naive", "--episodes", "60", "-e", "level=medium"]
    assert main([*args, "--quiet", "--by-info", "success", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = summary["by"]["info:success"]
    assert list(rows) == ["False", "True"]  # hardest first
    assert rows["True"]["success_rate"] == 1.0 and rows["False"]["success_rate"] == 0.0
    assert rows["True"]["episodes"] == round(summary["success_rate"] * 60) > 0
    assert rows["True"]["episodes"] + rows["False"]["episodes"] == 60


def test_rollout_by_an_info_key_no_episode_has_fails_after_writing_them(tmp_path, capsys):
    out = tmp_path / "episodes.jsonl"
    argv = ["rollout", "math-v0", "--policy", "oracle", "--episodes", "3", "--quiet"]
    with pytest.raises(SystemExit, match="no episode's last info has 'colour'; theirs: .*turns"):
        main([*argv, "--by-info", "colour", "--out", str(out)])
    assert len(out.read_text().splitlines()) == 3  # the played episodes are kept


def test_eval_by_a_field_the_tasks_lack_fails_before_playing(capsys, monkeypatch):
    import boltzoo.cli as cli

    monkeypatch.setattr(cli, "rollout", lambda *a, **k: pytest.fail("played before checking"))
    with pytest.raises(SystemExit, match="no field 'colour'; theirs: .*template"):
        main(["eval", "math-v0", "--policy", "oracle", "--by", "colour", "--quiet"])


def test_oracle_goes_with_a_framework_policy(capsys):
    # the env's own oracle is --policy oracle; --oracle only replaces a framework agent's model
    assert main(["eval", "math-v0", "--oracle", "--episodes", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--oracle plays the env's oracle through a framework" in err and "\n" not in err
