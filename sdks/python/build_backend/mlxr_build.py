"""A PEP 517 build backend for this one pure-Python package, so that
`pip install sdks/python` needs nothing from an index (Python 3.11+; older
Pythons fetch `tomli`). It writes the wheel (and sdist) from pyproject.toml's
[project] table: the `mlxr/` folder plus the dist-info files."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mlxr"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"License: {p['license']['text']}",
             f"Requires-Python: {p['requires-python']}"]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines += ["Description-Content-Type: text/markdown", "", (ROOT / p["readme"]).read_text()]
    return "\n".join(lines)


def _sources():
    for path in sorted((ROOT / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield path.relative_to(ROOT).as_posix(), path.read_bytes()


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = Path(metadata_directory) / _dist_info()
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata())
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    info = _dist_info()
    files = list(_sources()) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: mlxr_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = [_record_line(n, d) for n, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for n, d in files:
            wheel.writestr(n, d)
    return name




def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    extra = ["pyproject.toml", "README.md", "build_backend/mlxr_build.py"]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel, data in list(_sources()) + [(e, (ROOT / e).read_bytes()) for e in extra] + \
                [("PKG-INFO", _metadata().encode())]:
            entry = tarfile.TarInfo(f"{base}/{rel}")
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return name
