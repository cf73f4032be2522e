//! What the watcher remembers between runs: per file, the size and modification time it had
//! when it was last read, whether messages were left in it for later, and the runs it went to.
//!
//! The state is a cache, never the truth: the store finds every source it imported by its
//! source key, so a lost or corrupt state file only costs one read of each file (every
//! transcript comes back `up_to_date`). It is written whole to a temporary file beside it and
//! renamed over it, so a watcher killed mid-write leaves the old state or the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_core::RunId;
use serde::{Deserialize, Serialize};

use crate::Error;

/// The state file's format version; another version is read as no state.
const VERSION: u32 = 1;

/// What is remembered of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Seen {
    /// Its size when last read, in bytes.
    pub(crate) len: u64,
    /// Its modification time when last read, in nanoseconds since the Unix epoch.
    pub(crate) modified_ns: u128,
    /// Whether messages were left in it for a later read (it was still being written).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) held: bool,
    /// The runs its transcripts are in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) runs: Vec<RunId>,
}

impl Seen {
    /// What a file's metadata says now (its runs and held flag unset).
    pub(crate) fn of(meta: &std::fs::Metadata) -> Seen {
        Seen {
            len: meta.len(),
            modified_ns: meta.modified().map(nanos).unwrap_or(0),
            held: false,
            runs: Vec::new(),
        }
    }

    /// Its modification time.
    pub(crate) fn modified(&self) -> SystemTime {
        let secs = (self.modified_ns / 1_000_000_000) as u64;
        let nanos = (self.modified_ns % 1_000_000_000) as u32;
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    /// Whether the file has the size and time it had when read.
    pub(crate) fn same_file(&self, now: &Seen) -> bool {
        self.len == now.len && self.modified_ns == now.modified_ns
    }
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    version: u32,
    files: BTreeMap<PathBuf, Seen>,
}

/// The files seen, by absolute path, and where they are kept.
pub(crate) struct State {
    path: PathBuf,
    pub(crate) files: BTreeMap<PathBuf, Seen>,
    dirty: bool,
}

impl State {
    /// Reads the state at `path`: none when the file does not exist; a file that cannot be
    /// read as state (another version, corrupt) is passed over with a warning, since every
    /// source is found again in the store.
    pub(crate) fn load(path: &Path) -> State {
        let files = match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                Ok(file) if file.version == VERSION => file.files,
                Ok(file) => {
                    tracing::warn!(path = %path.display(), version = file.version, "watch state of another version: reading every file once");
                    BTreeMap::new()
                }
                Err(err) => {
                    tracing::warn!(path = %path.display(), %err, "watch state unreadable: reading every file once");
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        State {
            path: path.to_path_buf(),
            files,
            dirty: false,
        }
    }

    /// Records what was read of `file`.
    pub(crate) fn record(&mut self, file: PathBuf, seen: Seen) {
        if self.files.get(&file) != Some(&seen) {
            self.files.insert(file, seen);
            self.dirty = true;
        }
    }

    /// Forgets `file` (and, for a directory, every file under it); returns what it knew.
    pub(crate) fn forget(&mut self, path: &Path) -> Vec<(PathBuf, Seen)> {
        let gone: Vec<PathBuf> = self
            .files
            .range(path.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, _)| p.clone())
            .collect();
        let mut out = Vec::with_capacity(gone.len());
        for p in gone {
            if let Some(seen) = self.files.remove(&p) {
                out.push((p, seen));
            }
        }
        self.dirty |= !out.is_empty();
        out
    }

    /// Writes the state if it changed: whole, to a temporary file renamed over the old one.
    pub(crate) fn save(&mut self) -> Result<(), Error> {
        if !self.dirty {
            return Ok(());
        }
        let failed = |e: std::io::Error| Error::State {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let file = File {
            version: VERSION,
            files: std::mem::take(&mut self.files),
        };
        let bytes = serde_json::to_vec(&file);
        self.files = file.files;
        let bytes = bytes.map_err(|e| Error::State {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        let tmp = temp_path(&self.path);
        std::fs::write(&tmp, bytes).map_err(failed)?;
        std::fs::rename(&tmp, &self.path).map_err(failed)?;
        self.dirty = false;
        Ok(())
    }
}

/// The temporary file a state is written to before it is renamed over `path`.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}
