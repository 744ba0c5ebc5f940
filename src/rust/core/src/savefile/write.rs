//! Writing: the encoder of the format in [`super`], and the atomic write
//! that replaces a file only once its new contents are safely on disk.

use super::value::{Attrs, SaveValue, MAGIC, VERSION};
use anyhow::{bail, Context as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The whole file for `v`: header and payload.
pub fn encode(v: &SaveValue) -> Vec<u8> {
    let mut p = Vec::new();
    value(&mut p, v);
    let mut out = Vec::with_capacity(p.len() + 24);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(p.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    out.extend_from_slice(&p);
    out
}

fn len(p: &mut Vec<u8>, n: usize) {
    p.extend_from_slice(&(n as u64).to_le_bytes());
}

fn strings(p: &mut Vec<u8>, v: &[Option<String>]) {
    len(p, v.len());
    for s in v {
        match s {
            None => p.extend_from_slice(&u32::MAX.to_le_bytes()),
            Some(s) => {
                p.extend_from_slice(&(s.len() as u32).to_le_bytes());
                p.extend_from_slice(s.as_bytes());
            }
        }
    }
}

fn attrs(p: &mut Vec<u8>, a: &Attrs) {
    p.push(a.names.is_some() as u8 | ((a.dim.is_some() as u8) << 1));
    if let Some(n) = &a.names {
        p.push(4);
        strings(p, n);
    }
    if let Some(d) = &a.dim {
        p.push(2);
        len(p, d.len());
        d.iter().for_each(|x| p.extend_from_slice(&x.to_le_bytes()));
    }
}

fn value(p: &mut Vec<u8>, v: &SaveValue) {
    match v {
        SaveValue::Null => p.push(0),
        SaveValue::Logical(x, a) => {
            p.push(1);
            len(p, x.len());
            p.extend(x.iter().map(|b| match b {
                Some(false) => 0u8,
                Some(true) => 1,
                None => 2,
            }));
            attrs(p, a);
        }
        SaveValue::Integer(x, a) => {
            p.push(2);
            len(p, x.len());
            x.iter().for_each(|i| p.extend_from_slice(&i.to_le_bytes()));
            attrs(p, a);
        }
        SaveValue::Double(x, a) => {
            p.push(3);
            len(p, x.len());
            x.iter().for_each(|d| p.extend_from_slice(&d.to_le_bytes()));
            attrs(p, a);
        }
        SaveValue::String(x, a) => {
            p.push(4);
            strings(p, x);
            attrs(p, a);
        }
        SaveValue::List(x, a) => {
            p.push(5);
            len(p, x.len());
            x.iter().for_each(|e| value(p, e));
            attrs(p, a);
        }
    }
}

/// Removes the temporary file unless the write completed.
struct TempFile(Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Write `bytes` to `path` so that `path` holds either its previous contents
/// or all of the new ones, never a part: write a temporary file in the same
/// folder, flush it to disk, then rename it over `path` (and flush the
/// folder). Any failure is an error and leaves `path` as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> crate::Result<()> {
    let shown = path.display();
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.is_dir() {
            bail!("'{shown}' is a folder; give the path of a file");
        }
        let target = std::fs::metadata(path).map(|m| m.is_file()).unwrap_or(false);
        if !m.is_file() && !target {
            bail!("'{shown}' is not a regular file (a device or other special file); give the path of a file");
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!("the folder '{}' does not exist; create it first", dir.display());
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut temp = TempFile(None);
    let mut file = None;
    for i in 0..100u32 {
        let p = dir.join(format!(".{name}.{}.{i}.tmp", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(f) => {
                temp.0 = Some(p);
                file = Some(f);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => bail!("cannot write in the folder '{}': {e}", dir.display()),
        }
    }
    let (Some(mut f), Some(tmp)) = (file, temp.0.clone()) else {
        bail!("cannot create a temporary file in '{}'", dir.display());
    };
    f.write_all(bytes)
        .and_then(|_| f.flush())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing '{shown}' failed (is the disk full?); the previous file is unchanged"))?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace '{shown}'; the previous file is unchanged"))?;
    temp.0 = None;
    // The rename is durable once the folder is flushed too (best effort:
    // some file systems cannot flush a folder).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
