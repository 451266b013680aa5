"""The prediction store: one SQLite database of every model answer (resume, reuse).

Table ``answers``, primary key ``(model, data, condition, qid)`` — the three
fingerprints of :mod:`vqadiag.probes.fingerprints` and the question id — holds

* ``answer`` and ``p_answer`` (its probability; NULL without probabilities),
* ``ref`` and ``p_ref``: the reference answer the caller asked about (the
  answer with all objects, â_all) and its probability under this condition —
  what sufficiency, comprehensiveness and Leave-One-Out need even when â_all is
  not among the top answers,
* ``top``: the top-5 answers with probabilities (JSON), for prediction files,
* ``vector``: a float32 vector over the image's objects (attention for plain
  conditions when the model has it; the GradCAM scores for the ``gradcam``
  condition), NULL otherwise,
* ``raw``: a generative model's text before it became ``answer`` (NULL otherwise;
  added in schema 2, a schema-1 store gains the column when opened).

The database runs in WAL mode and the runner commits after every batch (after every
answer for a served model), so a process killed at any point (even SIGKILL) leaves
only whole commits; a restart reads them back and computes the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from vqadiag.data.io.faults import write_point
from vqadiag.errors import DataError

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    model TEXT NOT NULL,
    data TEXT NOT NULL,
    condition TEXT NOT NULL,
    qid TEXT NOT NULL,
    answer TEXT NOT NULL,
    p_answer REAL,
    ref TEXT,
    p_ref REAL,
    top TEXT,
    vector BLOB,
    raw TEXT,
    PRIMARY KEY (model, data, condition, qid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
SCHEMA_VERSION = "2"
#: schema versions this vqadiag upgrades in place (adding the ``raw`` column)
UPGRADABLE = ("1",)


@dataclass(frozen=True, slots=True)
class Answer:
    """One stored model answer (see the module docstring for the fields); slotted, as a
    diagnosis holds one per question and condition."""

    answer: str
    p_answer: float | None = None
    ref: str | None = None
    p_ref: float | None = None
    top: dict[str, float] | None = None
    vector: np.ndarray | None = None
    raw: str | None = None

    def probs(self) -> dict[str, float] | None:
        """``top`` plus the reference answer's probability (what prediction files carry)."""
        if self.top is None:
            return None
        out = dict(self.top)
        if self.ref is not None and self.p_ref is not None:
            out.setdefault(self.ref, self.p_ref)
        return out


Key = tuple[str, str, str, str]

#: the tables a prediction store holds (a store killed while being created may hold some)
TABLES = frozenset({"answers", "meta"})
#: SQLite's result codes for a file that is not a database, or a damaged one
_NOT_A_STORE = {"SQLITE_NOTADB", "SQLITE_CORRUPT"}


def _foreign_tables(db: sqlite3.Connection) -> list[str]:
    """The tables of ``db`` a prediction store does not have (a user's own database)."""
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return sorted(names - TABLES)


def _foreign_text(foreign: list[str]) -> str:
    """Why a database with ``foreign`` tables is refused."""
    shown = ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")
    return f"not a vqadiag prediction store: it holds other tables ({shown}); left unchanged"


def store_error_text(err: sqlite3.DatabaseError) -> str:
    """The one-line reason a store cannot be opened or written: ``not a vqadiag prediction
    store`` only when SQLite says the file is not a database (or is damaged); otherwise the
    error itself (a full disk, permission denied, an I/O error)."""
    if getattr(err, "sqlite_errorname", None) in _NOT_A_STORE:
        return f"not a vqadiag prediction store: {err}"
    return f"cannot use the prediction store: {err}"


def _read_only_mode(path: Path) -> str:
    """SQLite's URI mode to read ``path`` writing nothing, not even ``-wal`` / ``-shm``
    files: immutable without a write-ahead log; with one (a run killed, or running),
    read-only with it."""
    wal = path.with_name(path.name + "-wal").exists()
    return "mode=ro" if wal else "mode=ro&immutable=1"


def is_prediction_store(path: str | Path) -> bool:
    """Whether ``path`` is (or could only be) a prediction store: an SQLite database holding
    no table but a store's, or an empty file. Read only; a file that is not a database is
    one :class:`DataError` (``not a vqadiag prediction store``)."""
    target = Path(path)
    if target.is_symlink() or not target.is_file():
        return False
    if target.stat().st_size == 0:
        return True
    try:
        db = sqlite3.connect(f"{target.resolve().as_uri()}?{_read_only_mode(target)}", uri=True)
        try:
            return not _foreign_tables(db)
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        raise DataError(target, store_error_text(err)) from None


class PredictionStore:
    """``RESULT_DIR/store.sqlite``: get / put answers by (model, data, condition, qid)."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if self.path.is_symlink():
            raise DataError(self.path, "is a link; vqadiag does not follow links for its store")
        if readonly:  # read as it is: no journal mode, schema or upgrade written
            self._open_readonly()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(self.path))
            foreign = _foreign_tables(self.db)
            if foreign:
                self.db.close()
                raise DataError(self.path, _foreign_text(foreign))
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                self.db.commit()
        except sqlite3.DatabaseError as err:
            raise DataError(self.path, store_error_text(err)) from None
        if row is None:
            return
        if row[0] in UPGRADABLE:
            self._upgrade()
        elif row[0] != SCHEMA_VERSION:
            raise DataError(
                self.path, f"store schema {row[0]}, this vqadiag writes {SCHEMA_VERSION}"
            )

    def _open_readonly(self) -> None:
        """Open without writing anything (:func:`_read_only_mode`)."""
        mode = _read_only_mode(self.path)
        try:
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.DatabaseError as err:
            raise DataError(self.path, store_error_text(err)) from None
        if row is None or row[0] != SCHEMA_VERSION:
            self.db.close()
            raise DataError(
                self.path, f"store schema {row and row[0]}: run diagnose once to bring it to "
                f"schema {SCHEMA_VERSION} before planning over it",
            )  # fmt: skip

    def _upgrade(self) -> None:
        """Schema 1 → 2: add the ``raw`` column (unless a killed upgrade already did) and
        record the version; each step is safe to repeat."""
        try:
            columns = {r[1] for r in self.db.execute("PRAGMA table_info(answers)")}
            if "raw" not in columns:
                self.db.execute("ALTER TABLE answers ADD COLUMN raw TEXT")
            with self.db:
                self.db.execute("UPDATE meta SET value=? WHERE key='schema'", (SCHEMA_VERSION,))
        except sqlite3.Error as err:
            raise DataError(self.path, f"cannot upgrade the prediction store: {err}") from None

    def close(self) -> None:
        """Close the database (everything put is already committed)."""
        self.db.close()

    def __enter__(self) -> PredictionStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def get(self, key: Key) -> Answer | None:
        """The stored answer under ``key``, or None."""
        row = self.db.execute(
            "SELECT answer, p_answer, ref, p_ref, top, vector, raw FROM answers "
            "WHERE model=? AND data=? AND condition=? AND qid=?",
            key,
        ).fetchone()
        if row is None:
            return None
        answer, p_answer, ref, p_ref, top, vector, raw = row
        return Answer(
            answer,
            p_answer,
            ref,
            p_ref,
            None if top is None else orjson.loads(top),
            None if vector is None else np.frombuffer(vector, dtype=np.float32).copy(),
            raw,
        )

    def get_many(self, keys: Sequence[Key]) -> list[Answer | None]:
        """:meth:`get` for every key, in order."""
        return [self.get(k) for k in keys]

    def put_many(self, items: Iterable[tuple[Key, Answer]]) -> None:
        """Insert (or replace) answers and commit: one transaction per call (per batch)."""
        rows = []
        for key, a in items:
            top = None if a.top is None else orjson.dumps(a.top)
            vec = None if a.vector is None else np.asarray(a.vector, np.float32).tobytes()
            rows.append((*key, a.answer, a.p_answer, a.ref, a.p_ref, top, vec, a.raw))
        try:
            with self.db:
                self.db.executemany(
                    "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
                write_point("store batch before commit")
        except sqlite3.DatabaseError as err:  # a full disk, an I/O error: name the store
            raise DataError(self.path, store_error_text(err)) from None
        write_point("store batch after commit")

    def count(self, model: str | None = None) -> int:
        """Number of stored answers (of one model fingerprint when given)."""
        if model is None:
            return int(self.db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
        query = "SELECT COUNT(*) FROM answers WHERE model=?"
        return int(self.db.execute(query, (model,)).fetchone()[0])


class PlanningStore:
    """The store a plan reads: ``OUT``'s answers, and in memory the stand-ins of the calls
    planned so far, so that a later condition whose probe a run would find stored (one
    condition's answers serve another with the same model input) counts it as cached
    there too. Nothing reaches the database."""

    def __init__(self, base: PredictionStore) -> None:
        self.base = base
        self.planned: dict[Key, Answer] = {}

    def get(self, key: Key) -> Answer | None:
        """The planned stand-in of ``key``, else the stored answer, else None."""
        hit = self.planned.get(key)
        return hit if hit is not None else self.base.get(key)

    def put_many(self, items: Iterable[tuple[Key, Answer]]) -> None:
        """Remember stand-ins (in memory only)."""
        self.planned.update(items)

    def close(self) -> None:
        """Close the store read."""
        self.base.close()
