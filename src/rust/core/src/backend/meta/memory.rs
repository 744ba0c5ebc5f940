//! The memory of a meta buffer: one buffer per device and, for every tensor
//! in it, where its bytes are on each device: all of them (mirrored) or the
//! device's slice along one dimension (split). Reads and writes of the meta
//! buffer's bytes scatter to and gather from the devices' buffers.

use crate::layout::Layout;
use crate::memory::{align_up, Buffer, DeviceMemory};
use anyhow::ensure;
use std::any::Any;
use std::sync::Arc;

/// How one tensor lies over the devices.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceSplit {
    /// A full copy on every device.
    Mirrored,
    /// Device `j` holds `sizes[j]` consecutive indices of dimension `dim`.
    Axis { dim: usize, sizes: Vec<usize> },
}

/// One tensor of a meta buffer (contiguous, as allocated).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Byte offset in the meta buffer.
    pub offset: usize,
    pub layout: Layout,
    pub split: DeviceSplit,
    /// Byte offset of the device's copy or slice in its buffer.
    pub part_offsets: Vec<usize>,
}

impl Entry {
    pub fn bytes(&self) -> usize {
        self.layout.span_bytes()
    }

    /// The layout of the device's copy or slice.
    // BOUNDS-FN: plan() made every Axis entry with dim < ne.len() and one size per device; callers pass a device j below the number of devices.
    pub fn part_layout(&self, j: usize) -> Layout {
        match &self.split {
            DeviceSplit::Mirrored => self.layout,
            DeviceSplit::Axis { dim, sizes } => {
                let mut ne = self.layout.ne;
                ne[*dim] = sizes[j];
                Layout::contiguous(self.layout.dtype, ne)
            }
        }
    }

    /// Device and byte offset in the device's slice of byte `b` of the tensor
    /// (split tensors), and how many bytes from there stay on that device
    /// contiguously.
    // BOUNDS-FN: dim < ne.len() and the sizes add up to ne[dim] (plan); c < ne[dim], so the loop stops at a j < sizes.len().
    fn locate(&self, dim: usize, sizes: &[usize], b: usize) -> (usize, usize, usize) {
        let es = self.layout.dtype.size();
        let ne = &self.layout.ne;
        let inner: usize = ne[..dim].iter().product();
        let n = ne[dim];
        let (i, k) = (b / es, b % es);
        let (i_in, c, outer) = (i % inner, (i / inner) % n, i / (inner * n));
        let mut start = 0;
        let mut j = 0;
        while c >= start + sizes[j] {
            start += sizes[j];
            j += 1;
        }
        let local = i_in + inner * ((c - start) + sizes[j] * outer);
        let run = (inner - i_in) * es - k;
        (j, local * es + k, run)
    }
}

/// Where every tensor of a meta buffer is.
#[derive(Debug, Clone, Default)]
pub struct MetaLayout {
    /// Sorted by offset, not overlapping.
    pub entries: Vec<Entry>,
    /// Bytes of each device's buffer.
    pub part_sizes: Vec<usize>,
    /// Bytes of the meta buffer.
    pub size: usize,
}

impl MetaLayout {
    /// Lay out `tensors` (contiguous layouts, with their splits) over
    /// `n_parts` devices: one after the other, aligned, in the meta buffer
    /// and in each device's buffer.
    // BOUNDS-FN: j < n_parts = part_sizes.len(); dim < ne.len() is checked before ne[dim].
    pub fn plan(tensors: &[(Layout, DeviceSplit)], n_parts: usize) -> crate::Result<MetaLayout> {
        let mut out = MetaLayout { entries: Vec::new(), part_sizes: vec![0; n_parts], size: 0 };
        for (layout, split) in tensors {
            if let DeviceSplit::Axis { dim, sizes } = split {
                ensure!(*dim < layout.ne.len(), "split axis {dim} does not exist");
                ensure!(sizes.len() == n_parts, "a split gives {} sizes for {n_parts} devices", sizes.len());
                ensure!(
                    sizes.iter().sum::<usize>() == layout.ne[*dim],
                    "the split sizes {sizes:?} do not add up to the {} indices of dimension {dim}",
                    layout.ne[*dim]
                );
            }
            let mut e = Entry { offset: out.size, layout: *layout, split: split.clone(), part_offsets: Vec::new() };
            for j in 0..n_parts {
                e.part_offsets.push(out.part_sizes[j]);
                out.part_sizes[j] = align_up(out.part_sizes[j] + e.part_layout(j).span_bytes().max(1));
            }
            out.size = align_up(out.size + layout.span_bytes().max(1));
            out.entries.push(e);
        }
        Ok(out)
    }

    /// The entry holding byte `offset`.
    pub fn entry_at(&self, offset: usize) -> Option<&Entry> {
        let i = self.entries.partition_point(|e| e.offset <= offset);
        let e = self.entries.get(i.checked_sub(1)?)?;
        (offset < e.offset + e.bytes().max(1)).then_some(e)
    }
}

/// The memory behind a meta buffer.
#[derive(Debug)]
pub struct MetaMemory {
    pub parts: Vec<Arc<Buffer>>,
    pub layout: Arc<MetaLayout>,
}

fn overlap(e: &Entry, offset: usize, len: usize) -> Option<(usize, usize)> {
    let lo = offset.max(e.offset);
    let hi = (offset + len).min(e.offset + e.bytes());
    (lo < hi).then_some((lo, hi))
}

impl MetaMemory {
    /// Every device's slice of split entry `e` (read from the devices unless `blank`).
    // BOUNDS-FN: part_offsets has one entry per device (plan, over as many devices as `parts`).
    fn slices(&self, e: &Entry, blank: bool) -> crate::Result<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(self.parts.len());
        for (j, p) in self.parts.iter().enumerate() {
            let mut s = vec![0u8; e.part_layout(j).span_bytes()];
            if !blank {
                p.read_bytes(e.part_offsets[j], &mut s, "a meta buffer")?;
            }
            out.push(s);
        }
        Ok(out)
    }

    /// Call `f(device, offset in its slice, offset in the tensor, bytes)` for
    /// the runs covering bytes `lo..hi` (meta offsets) of split entry `e`.
    fn runs(e: &Entry, dim: usize, sizes: &[usize], lo: usize, hi: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
        let mut b = lo - e.offset;
        while b < hi - e.offset {
            let (j, at, run) = e.locate(dim, sizes, b);
            let n = run.min(hi - e.offset - b);
            f(j, at, b, n);
            b += n;
        }
    }

    /// Write bytes `lo..hi` (meta offsets, inside entry `e`) from `data` (starting at meta offset `base`).
    // BOUNDS-FN: lo..hi lies in the entry and in the bytes `data` holds from `base` (the callers' overlap()); j is a device (part_offsets and slices have one entry each); a run from locate() ends inside device j's slice.
    fn write_entry(&self, e: &Entry, lo: usize, hi: usize, data: &[u8], base: usize) -> crate::Result<()> {
        let what = "a meta buffer";
        let DeviceSplit::Axis { dim, sizes } = &e.split else {
            for (j, p) in self.parts.iter().enumerate() {
                p.write_bytes(e.part_offsets[j] + lo - e.offset, &data[lo - base..hi - base], what)?;
            }
            return Ok(());
        };
        let whole = lo == e.offset && hi == e.offset + e.bytes();
        let mut slices = self.slices(e, whole)?;
        // `b` counts from the entry's start; `data` starts at `base` (at or
        // before `lo`), so `e.offset + b - base` is never negative.
        Self::runs(e, *dim, sizes, lo, hi, |j, at, b, n| {
            let d = e.offset + b - base;
            slices[j][at..at + n].copy_from_slice(&data[d..d + n]);
        });
        for (j, p) in self.parts.iter().enumerate() {
            p.write_bytes(e.part_offsets[j], &slices[j], what)?;
        }
        Ok(())
    }

    /// Read bytes `lo..hi` of entry `e` into `out` (starting at meta offset `base`).
    // BOUNDS-FN: lo..hi lies in the entry and in the bytes `out` holds from `base` (the callers' overlap()); a meta device has at least one device, and part_offsets one entry each; a run from locate() ends inside device j's slice.
    fn read_entry(&self, e: &Entry, lo: usize, hi: usize, out: &mut [u8], base: usize) -> crate::Result<()> {
        let DeviceSplit::Axis { dim, sizes } = &e.split else {
            let at = e.part_offsets[0] + lo - e.offset;
            return self.parts[0].read_bytes(at, &mut out[lo - base..hi - base], "a meta buffer");
        };
        let slices = self.slices(e, false)?;
        Self::runs(e, *dim, sizes, lo, hi, |j, at, b, n| {
            let d = e.offset + b - base;
            out[d..d + n].copy_from_slice(&slices[j][at..at + n]);
        });
        Ok(())
    }
}

impl DeviceMemory for MetaMemory {
    fn write(&self, offset: usize, data: &[u8]) -> crate::Result<()> {
        for e in &self.layout.entries {
            if let Some((lo, hi)) = overlap(e, offset, data.len()) {
                self.write_entry(e, lo, hi, data, offset)?;
            }
        }
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> crate::Result<()> {
        out.fill(0);
        for e in &self.layout.entries {
            if let Some((lo, hi)) = overlap(e, offset, out.len()) {
                self.read_entry(e, lo, hi, out, offset)?;
            }
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;
    use crate::memory::{BufferTag, HostMemory};

    fn memory(tensors: &[(Layout, DeviceSplit)]) -> MetaMemory {
        let layout = MetaLayout::plan(tensors, 2).unwrap();
        let parts = layout
            .part_sizes
            .iter()
            .map(|&n| Arc::new(Buffer::allocate(&HostMemory, n, BufferTag::User).unwrap()))
            .collect();
        MetaMemory { parts, layout: Arc::new(layout) }
    }

    #[test]
    fn mirrored_and_split_round_trip() {
        let m3x4 = Layout::contiguous(DType::F32, [3, 4, 1, 1]);
        let v6 = Layout::contiguous(DType::F32, [6, 1, 1, 1]);
        let split = DeviceSplit::Axis { dim: 1, sizes: vec![1, 3] };
        let m = memory(&[(v6, DeviceSplit::Mirrored), (m3x4, split), (v6, DeviceSplit::Axis { dim: 0, sizes: vec![4, 2] })]);
        let bytes: Vec<u8> = (0..m.layout.size as u32).map(|i| (i % 251) as u8).collect();
        let ends: Vec<usize> = m.layout.entries.iter().map(|e| e.offset + e.bytes()).collect();
        m.write(0, &bytes).unwrap();
        let mut back = vec![0u8; bytes.len()];
        m.read(0, &mut back).unwrap();
        for (e, &end) in m.layout.entries.iter().zip(&ends) {
            assert_eq!(back[e.offset..end], bytes[e.offset..end]);
        }
        // device 1 holds columns 1..4 of the matrix: elements 3..12
        let e = &m.layout.entries[1];
        let mut s = vec![0u8; 36];
        m.parts[1].read_bytes(e.part_offsets[1], &mut s, "t").unwrap();
        assert_eq!(s[..], bytes[e.offset + 12..e.offset + 48]);
        // a partial write keeps the rest
        m.write(e.offset + 4, &[9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]).unwrap();
        m.read(0, &mut back).unwrap();
        assert_eq!(back[e.offset..e.offset + 4], bytes[e.offset..e.offset + 4]);
        assert_eq!(back[e.offset + 4..e.offset + 20], [9; 16]);
        assert_eq!(back[e.offset + 20..e.offset + 48], bytes[e.offset + 20..e.offset + 48]);
        assert!(m.layout.entry_at(e.offset + 47).is_some_and(|x| x.offset == e.offset));
        let bad = MetaLayout::plan(&[(v6, DeviceSplit::Axis { dim: 0, sizes: vec![1, 1] })], 2);
        assert!(bad.unwrap_err().to_string().contains("do not add up"));
    }
}
