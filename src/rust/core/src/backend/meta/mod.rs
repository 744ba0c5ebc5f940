//! The meta backend (ggml's meta device): several devices seen as one. A
//! split policy says, tensor by tensor, whether a tensor is mirrored (a full
//! copy on every device) or split along one dimension (each device holds a
//! slice); a meta buffer holds one buffer per device and scatters writes and
//! gathers reads accordingly ([`memory`]).
//!
//! A graph on a meta backend is computed by its first device, on the full
//! tensors (split tensors are gathered into temporary buffers there); every
//! result is then distributed to all devices as its split says, so each
//! device always holds its share of every tensor.
//!
//! The policy is a trait object: an R function in the R package. It is
//! called on the thread that allocates (R's main thread); when it fails, the
//! device mirrors that tensor and every later one (a sticky fallback) and
//! says so once through the log. The meta device itself is described in
//! [`super::device`]; [`split`] has the policy's questions and answers.

pub mod memory;
pub mod split;

use self::memory::{Entry, MetaLayout, MetaMemory, DeviceSplit};
use super::device::{Device, MetaDevice};
use super::node::Node;
use crate::memory::{Allocator, Buffer, BufferTag};
use crate::tensor::{Context, DataRef, Tensor};
use anyhow::bail;
use std::collections::HashMap;
use std::sync::Arc;

/// A backend of one of the devices under a meta backend.
pub trait Part: Allocator + Send + Sync + std::fmt::Debug {
    fn compute(&self, nodes: &[Node]) -> crate::Result<()>;
    fn free(&self);
    /// Set the threads of a CPU part (other parts ignore it).
    fn set_cpu_threads(&self, n: usize) -> crate::Result<()>;
    fn threads(&self) -> usize;
}

/// A backend on a meta device: one backend per device.
#[derive(Debug)]
pub struct MetaBackend {
    device: Arc<MetaDevice>,
    backends: Vec<Arc<dyn Part>>,
}

impl MetaBackend {
    /// A meta backend from one backend per device of `device`, in order.
    pub fn new(device: Arc<MetaDevice>, backends: Vec<Arc<dyn Part>>) -> crate::Result<MetaBackend> {
        anyhow::ensure!(backends.len() == device.devices().len(), "internal: one backend per device");
        Ok(MetaBackend { device, backends })
    }

    pub fn device(&self) -> Device {
        self.device.device()
    }

    pub fn free(&self) {
        for b in &self.backends {
            b.free();
        }
    }

    pub fn set_n_threads(&self, n: usize) -> crate::Result<()> {
        for b in &self.backends {
            b.set_cpu_threads(n)?;
        }
        Ok(())
    }

    pub fn n_threads(&self) -> usize {
        self.backends.first().map_or(1, |b| b.threads())
    }

    /// Give every tensor of `ctx` without memory a place in one new meta buffer.
    pub fn alloc_ctx_tensors(&self, ctx: &Context, tag: BufferTag) -> crate::Result<Option<Arc<Buffer>>> {
        ctx.check_live()?;
        let todo: Vec<Arc<Tensor>> =
            ctx.tensors().into_iter().filter(|t| t.view_base().is_none() && !t.has_data()).collect();
        if todo.is_empty() {
            return Ok(None);
        }
        let plan: Vec<_> = todo.iter().map(|t| (*t.layout(), self.device.split_of(t))).collect();
        let layout = MetaLayout::plan(&plan, self.backends.len())?;
        let mut parts = Vec::with_capacity(self.backends.len());
        for (b, &n) in self.backends.iter().zip(&layout.part_sizes) {
            let alloc: &dyn Allocator = b.as_ref();
            parts.push(Arc::new(Buffer::allocate(alloc, n.max(1), tag)?));
        }
        let size = layout.size;
        let mem = MetaMemory { parts, layout: Arc::new(layout) };
        let offsets: Vec<usize> = mem.layout.entries.iter().map(|e| e.offset).collect();
        let buf = Arc::new(Buffer::wrap(self.device.name(), size, tag, Box::new(mem)));
        for (t, off) in todo.iter().zip(offsets) {
            t.set_storage(crate::tensor::DataSlot { buf: buf.clone(), offset: off });
        }
        Ok(Some(buf))
    }

    /// Compute on the first device, then distribute the results.
    // BOUNDS-FN: a meta device has at least one device (MetaDevice::new), and a meta buffer one part and one offset per device.
    pub fn compute(&self, nodes: &[Node]) -> crate::Result<()> {
        let mut temps: HashMap<(u64, usize), Arc<Buffer>> = HashMap::new();
        let first = &self.backends[0];
        let mut plan = Vec::with_capacity(nodes.len());
        let mut written: Vec<(MetaView, usize)> = Vec::new();
        for n in nodes {
            let mut srcs = Vec::with_capacity(n.srcs.len());
            for s in &n.srcs {
                srcs.push(self.translate(s, first, &mut temps, true)?);
            }
            let dst = self.translate(&n.dst, first, &mut temps, false)?;
            if let Some(v) = meta_view(&n.dst.buf)? {
                let off = v.entry(n.dst.offset)?.offset;
                if !written.iter().any(|(w, o)| w.buf_id == v.buf_id && *o == off) {
                    written.push((v, off));
                }
            }
            plan.push(Node { op: n.op.clone(), srcs, dst, tensor: n.tensor.clone() });
        }
        first.compute(&plan)?;
        for (v, off) in &written {
            let e = v.entry(*off)?;
            match (&e.split, temps.get(&(v.buf_id, e.offset))) {
                (DeviceSplit::Mirrored, _) => {
                    let from = &v.mem_parts[0];
                    for (j, p) in v.mem_parts.iter().enumerate().skip(1) {
                        from.copy_to(e.part_offsets[0], p, e.part_offsets[j], e.bytes(), "a meta backend result")?;
                    }
                }
                (DeviceSplit::Axis { .. }, Some(tmp)) => {
                    let mut bytes = vec![0u8; e.bytes()];
                    tmp.read_bytes(0, &mut bytes, "a meta backend result")?;
                    v.buf.write_bytes(e.offset, &bytes, "a meta backend result")?;
                }
                (DeviceSplit::Axis { .. }, None) => bail!("internal: no full copy of a split result"),
            }
        }
        Ok(())
    }

    /// `r` as the first device sees it: in its part of a meta buffer, or in
    /// a temporary full copy of a split tensor (filled from the devices when
    /// `fill`).
    // BOUNDS-FN: a meta buffer has one part and one offset per device, at least one; temps holds `key` (inserted just above when missing).
    fn translate(
        &self,
        r: &DataRef,
        first: &Arc<dyn Part>,
        temps: &mut HashMap<(u64, usize), Arc<Buffer>>,
        fill: bool,
    ) -> crate::Result<DataRef> {
        let Some(v) = meta_view(&r.buf)? else { return Ok(r.clone()) };
        let e = v.entry(r.offset)?;
        let within = r.offset - e.offset;
        if e.split == DeviceSplit::Mirrored {
            return Ok(DataRef { buf: v.mem_parts[0].clone(), offset: e.part_offsets[0] + within, layout: r.layout });
        }
        let key = (v.buf_id, e.offset);
        if !temps.contains_key(&key) {
            let alloc: &dyn Allocator = first.as_ref();
            let tmp = Arc::new(Buffer::allocate(alloc, e.bytes().max(1), BufferTag::User)?);
            if fill {
                let mut bytes = vec![0u8; e.bytes()];
                v.buf.read_bytes(e.offset, &mut bytes, "a split tensor")?;
                tmp.write_bytes(0, &bytes, "a split tensor")?;
            }
            temps.insert(key, tmp);
        }
        Ok(DataRef { buf: temps[&key].clone(), offset: within, layout: r.layout })
    }
}

/// A meta buffer's parts and layout, read out of the buffer.
struct MetaView {
    buf: Arc<Buffer>,
    buf_id: u64,
    mem_parts: Vec<Arc<Buffer>>,
    layout: Arc<MetaLayout>,
}

impl MetaView {
    fn entry(&self, offset: usize) -> crate::Result<&Entry> {
        self.layout
            .entry_at(offset)
            .ok_or_else(|| anyhow::anyhow!("internal: byte {offset} of {} holds no tensor", self.buf.describe()))
    }
}

fn meta_view(buf: &Arc<Buffer>) -> crate::Result<Option<MetaView>> {
    let g = buf.read("a meta backend node")?;
    let crate::memory::BufferMem::Device(d) = &*g else { return Ok(None) };
    let Some(m) = d.as_any().downcast_ref::<MetaMemory>() else { return Ok(None) };
    Ok(Some(MetaView { buf: buf.clone(), buf_id: buf.id(), mem_parts: m.parts.clone(), layout: m.layout.clone() }))
}

#[cfg(test)]
mod tests;
