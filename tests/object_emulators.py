"""Google Cloud Storage and Azure Blob Storage on loopback, through their emulators, for the tests.

    store = GcsEmulator.start()        # gcp-storage-emulator (PyPI) in its own process, bucket "tdbfs-test"
    store = AzuriteEmulator.start()    # Azurite (npm) in its own process, container "tdbfs-test"
    store.env                          # what tdbfs needs to reach it through the SDK's own chain
    store.options                      # `-o` backend options tdbfs needs besides (none secret)
    url = store.upload(folder, "name") # every file, byte for byte (no folder objects, as in the real stores)
    store.download("name", dest)       # the objects back as a local folder
    store.stop()

Both run in a child process (the daemon reaches them over HTTP like a real store) and are stopped by
`stop`. Where one cannot start here, `start` raises `EmulatorMissing` saying why; the tests skip on it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTAINER = "tdbfs-test"

#: Azurite's documented development account (public, the same in every Azurite)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class EmulatorMissing(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(proc: subprocess.Popen, port: int, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with status {proc.returncode} before answering")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{what} did not answer on port {port} within {timeout:.0f} s")


class _Emulator:
    scheme: str
    #: environment for tdbfs (and for this process's own client)
    env: dict
    #: backend options for `tdbfs ... -o`
    options: list

    def __init__(self, proc: subprocess.Popen, port: int, log_path: Path):
        self.proc, self.port, self.log_path = proc, port, log_path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fs(self):
        raise NotImplementedError

    def url(self, prefix: str) -> str:
        return f"{self.scheme}://{CONTAINER}/{prefix}"

    def upload(self, folder: Path, prefix: str) -> str:
        """Every regular file under `folder` as an object under `prefix`, byte for byte; the URL."""
        fs = self.fs()
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and not path.is_symlink():
                fs.pipe_file(f"{CONTAINER}/{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())
        return self.url(prefix)

    def download(self, prefix: str, dest: Path) -> Path:
        """The objects under `prefix` as a local folder: the local copy the mounts are compared with."""
        fs = self.fs()
        root = f"{CONTAINER}/{prefix}"
        for key in fs.find(root):
            target = Path(dest) / key[len(root) + 1:]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fs.cat_file(key))
        return Path(dest)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class GcsEmulator(_Emulator):
    """gcp-storage-emulator, which gcsfs (like Google's own clients) finds through STORAGE_EMULATOR_HOST."""

    scheme = "gs"
    # anonymous: without it the credential chain would ask a GCE metadata server off this machine.
    options = ["-o", "gcs.token=anon"]

    @classmethod
    def start(cls) -> "GcsEmulator":
        try:
            import gcp_storage_emulator  # noqa: F401
            import gcsfs  # noqa: F401
        except ImportError as exc:
            raise EmulatorMissing(f"{exc.name} is not installed (pip install -e '.[test]')") from None
        port = free_port()
        log_path = Path(tempfile.mkstemp(prefix="gcs-emulator-", suffix=".log")[1])
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                                     "--port", str(port), "--in-memory", "--default-bucket", CONTAINER],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1"))  # its access log, line by line
        emulator = cls(proc, port, log_path)
        _wait_for_port(proc, port, "gcp-storage-emulator")
        # gcsfs >= 2026 asks a gRPC control plane for each bucket's layout (60 s per try against an
        # emulator, which has none); this switches that experiment off
        emulator.env = {"STORAGE_EMULATOR_HOST": emulator.endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
        return emulator

    def fs(self):
        # the core class: gcsfs.GCSFileSystem may be the experimental one, which asks gRPC first (see `start`)
        from gcsfs.core import GCSFileSystem
        return GCSFileSystem(token="anon", endpoint_url=self.endpoint, skip_instance_cache=True)


class AzuriteEmulator(_Emulator):
    """Azurite's blob service; adlfs finds it through AZURE_STORAGE_CONNECTION_STRING."""

    scheme = "az"
    options: list = []

    @classmethod
    def executable(cls) -> str:
        """azurite-blob from the project's npm prefix (scripts/_setup.sh installs it there), else from PATH."""
        local = ROOT / ".npm" / "node_modules" / ".bin" / "azurite-blob"
        found = str(local) if local.exists() else shutil.which("azurite-blob")
        if not found:
            raise EmulatorMissing("Azurite is not installed (scripts/_setup.sh runs "
                                  "npm install --prefix .npm azurite)")
        if not shutil.which("node"):
            raise EmulatorMissing("Azurite needs node, which is not installed")
        return found

    @classmethod
    def start(cls) -> "AzuriteEmulator":
        try:
            import adlfs  # noqa: F401
        except ImportError as exc:
            raise EmulatorMissing(f"{exc.name} is not installed (pip install -e '.[test]')") from None
        port = free_port()
        log_path = Path(tempfile.mkstemp(prefix="azurite-", suffix=".log")[1])
        with open(log_path, "wb") as log:
            # --disableTelemetry: Azurite would otherwise report to Microsoft over the network
            proc = subprocess.Popen([cls.executable(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                                     "--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck",
                                     "--loose"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        emulator = cls(proc, port, log_path)
        _wait_for_port(proc, port, "Azurite")
        emulator.env = {"AZURE_STORAGE_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={emulator.endpoint}/{AZURITE_ACCOUNT};")}
        emulator.fs().mkdir(CONTAINER)
        return emulator

    def fs(self):
        import adlfs
        return adlfs.AzureBlobFileSystem(connection_string=self.env["AZURE_STORAGE_CONNECTION_STRING"],
                                         skip_instance_cache=True)


EMULATORS = {"gcs": GcsEmulator, "azure": AzuriteEmulator}
