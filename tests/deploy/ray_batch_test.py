"""examples/ray_batch.py on a local Ray cluster: every result equals a single-process run.

Usage: scripts/ray-test [ROWS]   (makes build/ray-venv with examples/requirements.txt, then runs
this with build/python on PYTHONPATH). Draws ROWS (default 48) of the demo model's held-out
images (tools/demo_model/shapes.py), answers their prompts (captions, questions, detections)
once in this process without Ray and once over 2 Ray actors (1 CPU each), and compares the
Parquet files row by row; then times 1 actor x 1 CPU, 2 actors x 1 CPU and 1 actor x 2 CPUs
(figures in docs/scale-out.md). Exits 77 when ray or ocular is not importable.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import pyarrow.parquet as pq
    import ray

    import ocular  # noqa: F401
except ImportError as e:
    print(f"ray_batch_test: {e}: skipped (scripts/ray-test makes the venv)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import ray_batch  # noqa: E402

MODEL = "models/shapes-paligemma"


def draw_images(folder, rows):
    subset = os.path.join(folder, "subset.jsonl")
    with open(f"{MODEL}/heldout.jsonl") as f, open(subset, "w") as out:
        for line in [l for l in f if l.strip()][:rows]:
            out.write(line)
    subprocess.run([sys.executable, "-m", "tools.demo_model.shapes", "--set", subset, "--out", folder],
                   check=True)
    return os.path.join(folder, "tasks.jsonl")


def run(tasks, out, *extra):
    """The rows (without their timing columns) and the rows per second of the work itself:
    from the first batch's start to the last batch's end (actor start-up excluded)."""
    args = ["-m", MODEL, "--list", tasks, "--out", out, "--max-tokens", "40", *extra]
    assert ray_batch.main(args) == 0
    rows = pq.read_table(out).to_pylist()
    busy = max(r["batch_end"] for r in rows) - min(r["batch_start"] for r in rows)
    for r in rows:
        del r["batch_start"], r["batch_end"]
    return rows, len(rows) / busy


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 48
    with tempfile.TemporaryDirectory() as tmp:
        tasks = draw_images(tmp, rows)
        single, _ = run(tasks, f"{tmp}/single.parquet", "--single-process", "--cpus-per-actor", "1")
        ray_batch.start_ray(num_cpus=2)
        two, _ = run(tasks, f"{tmp}/ray2.parquet", "--actors", "2", "--cpus-per-actor", "1")
        assert len(two) == len(single) == rows
        for a, b in zip(single, two):
            assert a == b, f"Ray and single-process results differ:\n{a}\n{b}"
        assert sum(1 for r in single if r["boxes"]) > 0, "no detection among the rows"
        figures = {"rows": rows}
        for name, extra in [("single_process_1_thread", ["--single-process", "--cpus-per-actor", "1"]),
                            ("1_actor_1_cpu", ["--actors", "1", "--cpus-per-actor", "1"]),
                            ("2_actors_1_cpu", ["--actors", "2", "--cpus-per-actor", "1"]),
                            ("1_actor_2_cpus", ["--actors", "1", "--cpus-per-actor", "2"])]:
            got, rate = run(tasks, f"{tmp}/{name}.parquet", *extra)
            assert got == single
            figures[f"{name}_rows_per_s"] = round(rate, 2)
        print(json.dumps(figures))
    print(f"ray_batch_test: {rows} rows equal over 2 actors and in one process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
