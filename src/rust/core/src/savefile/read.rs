//! Reading a saved-model file: the header, the checksum, then the payload,
//! every length checked against the bytes left before anything is allocated.

use super::value::{checksum, Attrs, SaveValue, HEADER, MAGIC, MAX_DEPTH, VERSION};
use crate::base::bytes::{array, groups};
use anyhow::{bail, ensure};

fn corrupt(what: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("the file is corrupted ({what}); it cannot be loaded: save the model again")
}

/// Decode a whole file: header, checksum, payload.
pub fn decode(bytes: &[u8]) -> crate::Result<SaveValue> {
    if bytes.len() < HEADER || bytes.get(..8) != Some(MAGIC.as_slice()) {
        if bytes.starts_with(&[0x1f, 0x8b]) || bytes.starts_with(b"RDX") || bytes.starts_with(b"X\n") {
            bail!(
                "it is an R data (RDS) file, not a ggmlR model container; RDS files can carry code, so they are \
                 not loaded: save the model again with this version of ggmlR"
            );
        }
        bail!("it is not a file saved by ggmlR (no ggmlR model container header)");
    }
    let at = |o: usize| bytes.get(o..).and_then(array::<8>).unwrap_or([0; 8]);
    let u32_at = |o: usize| u32::from_le_bytes(array(&at(o)).unwrap_or([0; 4]));
    let version = u32_at(8);
    if version != VERSION {
        bail!(
            "it is a ggmlR model file of format version {version}; this ggmlR reads version {VERSION}{}",
            if version > VERSION { " (update ggmlR)" } else { "" }
        );
    }
    let len = u64::from_le_bytes(at(12));
    let have = (bytes.len() - HEADER) as u64;
    if len > have {
        bail!("the file is truncated: its header announces {len} bytes of data, {have} are there; save the model again");
    }
    ensure!(len == have, corrupt(format!("{} bytes after the data", have - len)));
    let payload = bytes.get(HEADER..).unwrap_or(&[]);
    let crc = checksum(payload);
    ensure!(crc == u32_at(20), corrupt("the checksum does not match the data"));
    let mut r = Reader { b: payload, pos: 0 };
    let v = r.value(0)?;
    ensure!(r.pos == payload.len(), corrupt("data after the model"));
    Ok(v)
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize) -> crate::Result<&'a [u8]> {
        ensure!(n <= self.left(), corrupt(format!("a value runs past the end at byte {}", self.pos + HEADER)));
        let s = self.b.get(self.pos..self.pos + n).unwrap_or(&[]);
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> crate::Result<u8> {
        Ok(u8::from_le_bytes(self.fixed()?))
    }

    fn u32(&mut self) -> crate::Result<u32> {
        Ok(u32::from_le_bytes(self.fixed()?))
    }

    /// The next `N` bytes as an array.
    fn fixed<const N: usize>(&mut self) -> crate::Result<[u8; N]> {
        let at = self.pos + HEADER;
        array(self.take(N)?).ok_or_else(|| corrupt(format!("a value cut short at byte {at}")))
    }

    /// A length of elements of at least `min_bytes` each, checked against
    /// the bytes left, so no allocation can exceed the file's own size.
    fn len(&mut self, min_bytes: usize) -> crate::Result<usize> {
        let n = u64::from_le_bytes(self.fixed()?);
        let fits = (n as u128) * (min_bytes as u128) <= self.left() as u128;
        ensure!(fits, corrupt(format!("a length of {n} at byte {} exceeds the file", self.pos + HEADER - 8)));
        Ok(n as usize)
    }

    fn strings(&mut self, n: usize) -> crate::Result<Vec<Option<String>>> {
        let mut v = crate::base::alloc::try_with_capacity(n, "saved strings")?;
        for _ in 0..n {
            let l = self.u32()?;
            if l == u32::MAX {
                v.push(None);
                continue;
            }
            let s = self.take(l as usize)?;
            let s = std::str::from_utf8(s).map_err(|_| corrupt("a string that is not UTF-8"))?;
            v.push(Some(s.to_string()));
        }
        Ok(v)
    }

    fn value(&mut self, depth: usize) -> crate::Result<SaveValue> {
        ensure!(depth <= MAX_DEPTH, corrupt(format!("values nested deeper than {MAX_DEPTH}")));
        let tag = self.u8()?;
        let v = match tag {
            0 => return Ok(SaveValue::Null),
            1 => {
                let n = self.len(1)?;
                let mut v = crate::base::alloc::try_with_capacity(n, "saved logicals")?;
                for &b in self.take(n)? {
                    v.push(match b {
                        0 => Some(false),
                        1 => Some(true),
                        2 => None,
                        _ => return Err(corrupt(format!("logical value {b}"))),
                    });
                }
                SaveValue::Logical(v, Attrs::default())
            }
            2 => {
                let n = self.len(4)?;
                let mut v = crate::base::alloc::try_with_capacity(n, "saved integers")?;
                v.extend(groups(self.take(n * 4)?).map(i32::from_le_bytes));
                SaveValue::Integer(v, Attrs::default())
            }
            3 => {
                let n = self.len(8)?;
                let mut v = crate::base::alloc::try_with_capacity(n, "saved numbers")?;
                v.extend(groups(self.take(n * 8)?).map(f64::from_le_bytes));
                SaveValue::Double(v, Attrs::default())
            }
            4 => {
                let n = self.len(4)?;
                SaveValue::String(self.strings(n)?, Attrs::default())
            }
            5 => {
                let n = self.len(2)?;
                let mut v = crate::base::alloc::try_with_capacity(n, "saved lists")?;
                for _ in 0..n {
                    v.push(self.value(depth + 1)?);
                }
                SaveValue::List(v, Attrs::default())
            }
            t => return Err(corrupt(format!("unknown value tag {t} at byte {}", self.pos + HEADER - 1))),
        };
        let n = v.len();
        let flags = self.u8()?;
        ensure!(flags & !3 == 0, corrupt(format!("attribute flags {flags}")));
        let mut attrs = Attrs::default();
        if flags & 1 != 0 {
            ensure!(self.u8()? == 4, corrupt("names that are not strings"));
            let k = self.len(4)?;
            ensure!(k == n, corrupt(format!("{k} names for {n} values")));
            attrs.names = Some(self.strings(k)?);
        }
        if flags & 2 != 0 {
            ensure!(self.u8()? == 2, corrupt("a dim that is not integer"));
            let k = self.len(4)?;
            ensure!((1..=8).contains(&k), corrupt(format!("a dim of {k} extents")));
            let d: Vec<i32> = groups(self.take(k * 4)?).map(i32::from_le_bytes).collect();
            let prod = d.iter().try_fold(1u64, |a, &x| if x < 0 { None } else { a.checked_mul(x as u64) });
            ensure!(prod == Some(n as u64), corrupt(format!("dim {d:?} for {n} values")));
            attrs.dim = Some(d);
        }
        Ok(match v {
            SaveValue::Logical(x, _) => SaveValue::Logical(x, attrs),
            SaveValue::Integer(x, _) => SaveValue::Integer(x, attrs),
            SaveValue::Double(x, _) => SaveValue::Double(x, attrs),
            SaveValue::String(x, _) => SaveValue::String(x, attrs),
            SaveValue::List(x, _) => SaveValue::List(x, attrs),
            SaveValue::Null => SaveValue::Null,
        })
    }
}
