"""``ftplat sweeps list`` and ``show`` on storage they cannot read: a file given as the root,
storage that does not answer, and sweep folders whose ``sweep_config.json`` or summary is cut
short or not ftplat's. Each is one ``error:`` line (exit 2), and in a listing one unreadable
sweep is a line of its own, never the end of the listing."""

from __future__ import annotations

import json

import pyarrow.fs as pafs
import pytest
from local_servers import find_free_port, run_moto_s3_in_threads
from test_sweeps_status import RUNNING_SWEEP, write_sweep

import ftplat.storage
from ftplat.cli.main import main as ftplat_main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = ftplat_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_broken_sweeps(root) -> None:
    for name, text in (("cut", "{bad"), ("foreign", "{}"), ("listish", "[1, 2]")):
        (root / name).mkdir()
        (root / name / "sweep_config.json").write_text(text)


def test_a_file_as_the_storage_root_is_one_error_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("not a folder")
    code, out, err = run(capsys, "sweeps", "list", str(tmp_path / "afile"))
    assert code == 2 and out == ""
    assert err.startswith("error: STORAGE ") and "is a file" in err and len(err.splitlines()) == 1


def test_unreadable_sweeps_are_listed_as_such_beside_the_others(tmp_path, capsys):
    write_sweep(tmp_path, "live", RUNNING_SWEEP)
    write_broken_sweeps(tmp_path)
    code, out, err = run(capsys, "sweeps", "list", str(tmp_path), "--json")
    assert code == 0 and err == ""
    by_name = {s["name"]: s for s in json.loads(out)["sweeps"]}
    assert by_name["live"]["status"] == "running"
    assert by_name["cut"]["status"].startswith("unreadable: sweep_config.json: JSONDecodeError")
    for name in ("foreign", "listish"):
        assert by_name[name]["status"] == "unreadable: sweep_config.json: not an ftplat sweep config " \
                                          "(no job and search_space)"
        assert by_name[name]["path"] == str(tmp_path / name)
    code, out, _ = run(capsys, "sweeps", "list", str(tmp_path))
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["sweep", "status"]
    assert [ln.split()[:2] for ln in lines[1:5]] == [["cut", "unreadable"], ["foreign", "unreadable"],
                                                     ["listish", "unreadable"], ["live", "running"]]
    assert lines[5].startswith("cut: unreadable: sweep_config.json: JSONDecodeError")


def test_show_of_an_unreadable_sweep_is_one_error_line(tmp_path, capsys):
    write_broken_sweeps(tmp_path)
    for sweep in (str(tmp_path / "cut"), "foreign"):
        code, out, err = run(capsys, "sweeps", "show", sweep, "--storage", str(tmp_path))
        assert code == 2 and out == "" and len(err.splitlines()) == 1
        assert err.startswith(f"error: SWEEP {str(tmp_path / sweep.rsplit('/', 1)[-1])!r} cannot be read: "
                              "sweep_config.json: ")


def test_a_cut_short_summary_makes_the_sweep_unreadable_not_the_listing(tmp_path, capsys):
    write_sweep(tmp_path, "live", RUNNING_SWEEP)
    done = write_sweep(tmp_path, "done", RUNNING_SWEEP[:2])
    (done / "summary.json").write_text('{"sweep_name": "done", "trials": [')
    code, out, _ = run(capsys, "sweeps", "list", str(tmp_path), "--json")
    statuses = [(s["name"], s["status"].split(":")[0]) for s in json.loads(out)["sweeps"]]
    assert code == 0 and statuses == [("done", "unreadable"), ("live", "running")]
    code, out, err = run(capsys, "sweeps", "show", str(done))
    assert code == 2 and out == "" and "cannot be read: summary.json: JSONDecodeError" in err
    assert len(err.splitlines()) == 1


def test_every_command_reading_a_cut_short_summary_says_so_in_one_line(tmp_path, capsys):
    """export and checkpoints gc printed a JSONDecodeError traceback (exit 1); reproduce said
    "the sweep failed" though nothing ran."""
    done = write_sweep(tmp_path, "done", RUNNING_SWEEP[:2])
    (done / "summary.json").write_text('{"sweep_name": "done", "trials": [')
    for argv in (["export", str(done), str(tmp_path / "out")], ["checkpoints", "gc", str(done), "--dry-run"],
                 ["reproduce", str(done)]):
        code, out, err = run(capsys, *argv)
        assert (code, len(err.splitlines())) == (2, 1), (argv, err)
        assert err.startswith(f"error: SWEEP {str(done)!r} cannot be read: summary.json: JSONDecodeError"), argv


def test_a_renamed_sweep_is_listed_by_its_folder_which_show_finds(tmp_path, capsys):
    """A copy under another name was listed by the name it ran under, which `sweeps show` then
    could not find."""
    import shutil

    write_sweep(tmp_path, "done", RUNNING_SWEEP[:2])
    shutil.copytree(tmp_path / "done", tmp_path / "renamed")
    code, out, _ = run(capsys, "sweeps", "list", str(tmp_path), "--json")
    assert code == 0 and [s["name"] for s in json.loads(out)["sweeps"]] == ["done", "renamed"]
    code, out, err = run(capsys, "sweeps", "show", "renamed", "--storage", str(tmp_path))
    assert code == 0 and err == "" and "renamed" in out


def test_a_torn_experiment_state_is_named(tmp_path, capsys):
    """A full disk tore Tune's state: the listing said a bare JSONDecodeError, naming no file."""
    torn = write_sweep(tmp_path, "torn", RUNNING_SWEEP)
    state = sorted(torn.glob("experiment_state-*.json"))[-1]
    state.write_text(state.read_text()[:40])
    code, out, err = run(capsys, "sweeps", "show", str(torn))
    assert code == 2 and f"cannot be read: Tune's state {state.name} cannot be read (JSONDecodeError" in err


@pytest.fixture
def unreachable_s3(monkeypatch):
    """s3:// storage whose endpoint refuses connections, tried once (pyarrow's default retries
    take seconds to give up), with credentials in the URI that must not be printed."""
    port = find_free_port()
    resolve = ftplat.storage.resolve_storage

    def resolve_unreachable(uri: str):
        if not uri.startswith("s3://"):
            return resolve(uri)
        fs = pafs.S3FileSystem(access_key="k", secret_key="s", region="us-east-1", scheme="http",
                               endpoint_override=f"127.0.0.1:{port}", connect_timeout=1,
                               retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
        return fs, uri.split("@", 1)[-1].removeprefix("s3://")

    monkeypatch.setattr(ftplat.storage, "resolve_storage", resolve_unreachable)
    return "s3://KEY:s3cr3t@bkt/prefix"


@pytest.mark.parametrize(("argv", "named"), [(["list", "{root}"], "STORAGE"), (["show", "{root}/sweep"], "SWEEP"),
                                             (["show", "sweep", "--storage", "{root}"], "--storage")],
                         ids=["list", "show-uri", "show-name"])
def test_unreachable_storage_is_one_error_line_naming_the_argument(unreachable_s3, capsys, argv, named):
    code, out, err = run(capsys, "sweeps", *[a.format(root=unreachable_s3) for a in argv])
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: {named} 's3://***@bkt/prefix") and "is not reachable" in err
    assert "AWS_ENDPOINT_URL" in err and "s3cr3t" not in err


def test_an_unreadable_sweep_through_s3_is_listed_and_a_missing_bucket_refused(tmp_path, capsys, monkeypatch):
    """Through pyarrow's S3 filesystem (a moto server on localhost)."""
    with run_moto_s3_in_threads(monkeypatch) as s3:
        capsys.readouterr()  # the server's start line
        s3.create_bucket(Bucket="bkt")
        s3.put_object(Bucket="bkt", Key="root/cut/sweep_config.json", Body=b"{bad")
        code, out, err = run(capsys, "sweeps", "list", "s3://bkt/root", "--json")
        assert code == 0 and err == ""
        assert [(s["name"], s["status"].split(":")[0]) for s in json.loads(out)["sweeps"]] == [("cut", "unreadable")]
        code, out, err = run(capsys, "sweeps", "show", "s3://bkt/root/cut")
        assert code == 2 and "cannot be read: sweep_config.json: JSONDecodeError" in err
        code, out, err = run(capsys, "sweeps", "list", "s3://no-such-bucket/root")
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith("error: STORAGE ")
