//! Search tables of the lattice formats (ggml's `iq2xs_init_impl` and
//! `iq3xs_init_impl`): for every point of the integer cube around the grid,
//! either its grid index or the list of its nearest grid points.
//!
//! Points are written with coordinates `2*code + 1` (1, 3, 5, ... for codes
//! 0, 1, 2, ...); a cube point's key packs its codes, `bits` each. A key that
//! is on the grid maps to its index; any other maps to `-(offset + 1)`, where
//! `neighbours[offset]` is the count and the indices follow, ordered by
//! distance then index, covering the `nwant` smallest distances.

use super::grids;
use super::types::QType;
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

/// Which grid a table is built over.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TableKind {
    Iq2Xxs,
    Iq2Xs,
    Iq2S,
    Iq1S,
    Iq3Xxs,
    Iq3S,
}

impl TableKind {
    const ALL: [TableKind; 6] = [TableKind::Iq2Xxs, TableKind::Iq2Xs, TableKind::Iq2S, TableKind::Iq1S, TableKind::Iq3Xxs, TableKind::Iq3S];

    pub fn of(q: QType) -> Option<TableKind> {
        Some(match q {
            QType::IQ2_XXS => TableKind::Iq2Xxs,
            QType::IQ2_XS => TableKind::Iq2Xs,
            QType::IQ2_S => TableKind::Iq2S,
            QType::IQ1_S | QType::IQ1_M => TableKind::Iq1S,
            QType::IQ3_XXS => TableKind::Iq3Xxs,
            QType::IQ3_S => TableKind::Iq3S,
            _ => return None,
        })
    }

    fn slot(self) -> usize {
        TableKind::ALL.iter().position(|&k| k == self).unwrap_or(0)
    }

    /// (elements per point, bits per code, number of nearest distances kept)
    fn shape(self) -> (usize, u32, usize) {
        match self {
            TableKind::Iq2Xxs | TableKind::Iq2Xs => (8, 2, 2),
            TableKind::Iq2S => (8, 2, 1),
            TableKind::Iq1S => (8, 2, 3),
            TableKind::Iq3Xxs => (4, 3, 2),
            TableKind::Iq3S => (4, 3, 3),
        }
    }

    /// The codes of every grid point, `dim` per point.
    fn grid_codes(self) -> Vec<u8> {
        let words: Vec<u64> = match self {
            TableKind::Iq2Xxs => grids::IQ2XXS_GRID.to_vec(),
            TableKind::Iq2Xs => grids::IQ2XS_GRID.to_vec(),
            TableKind::Iq2S => grids::IQ2S_GRID.to_vec(),
            TableKind::Iq1S => grids::IQ1S_GRID.to_vec(),
            TableKind::Iq3Xxs => grids::IQ3XXS_GRID.iter().map(|&w| w as u64).collect(),
            TableKind::Iq3S => grids::IQ3S_GRID.iter().map(|&w| w as u64).collect(),
        };
        let values: &[u8] = match self {
            TableKind::Iq2Xxs | TableKind::Iq2Xs | TableKind::Iq2S => &[0x08, 0x19, 0x2b],
            TableKind::Iq1S => &[0xff, 0x00, 0x01],
            TableKind::Iq3Xxs => &[0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3e],
            TableKind::Iq3S => &[0x01, 0x03, 0x05, 0x07, 0x09, 0x0b, 0x0d, 0x0f],
        };
        let dim = self.shape().0;
        let mut out = Vec::with_capacity(words.len() * dim);
        for w in words {
            for i in 0..dim {
                let b = (w >> (8 * i)) as u8;
                out.push(values.iter().position(|&v| v == b).unwrap_or(0) as u8);
            }
        }
        out
    }
}

/// A built table.
pub struct Lattice {
    pub dim: usize,
    /// Grid points as coordinates `2*code + 1`, `dim` per point.
    pub grid: Vec<i8>,
    pub map: Vec<i32>,
    pub neighbours: Vec<u16>,
}

impl Lattice {
    /// Coordinates of grid point `i` (none past the end of the grid).
    #[inline]
    pub fn point(&self, i: usize) -> &[i8] {
        self.grid.get(i * self.dim..(i + 1) * self.dim).unwrap_or(&[])
    }

    /// The neighbour list of an off-grid key's map entry `-(offset + 1)`
    /// (`neighbours[offset]` is the count; empty for an entry that is none).
    #[inline]
    pub fn neighbours_of(&self, entry: i32) -> &[u16] {
        // !entry is -entry - 1 without overflow.
        let off = !entry as usize;
        let Some(&n) = self.neighbours.get(off) else { return &[] };
        self.neighbours.get(off + 1..off + 1 + n as usize).unwrap_or(&[])
    }

    // BOUNDS-FN: `codes` and `grid` hold dim codes for each of the n_grid points,
    // and i, j < n_grid, k < dim (`pos` has dim entries). Each code is below the
    // number of its `values` (3 for 2 bits and dim 8, 8 for 3 bits and dim 4),
    // so a key is at most 2 * (4^8 - 1) / 3 = 43690 < 43692 or below 8^4 = 4096:
    // within `map`; `lists` has one entry per key. `distinct` is not empty (the
    // grids have 256 to 2048 points) and nwant >= 1.
    fn build(kind: TableKind) -> Lattice {
        let (dim, bits, nwant) = kind.shape();
        let codes = kind.grid_codes();
        let grid: Vec<i8> = codes.iter().map(|&c| 2 * c as i8 + 1).collect();
        let n_grid = grid.len() / dim;
        let map_size = if bits == 2 { 43692 } else { 4096 };
        let mask = (1usize << bits) - 1;
        let mut map = vec![-1i32; map_size];
        for i in 0..n_grid {
            let key: usize = (0..dim).map(|k| (codes[i * dim + k] as usize) << (bits as usize * k)).sum();
            map[key] = i as i32;
        }
        let lists: Vec<Option<Vec<u16>>> = (0..map_size)
            .into_par_iter()
            .map(|key| {
                if map[key] >= 0 {
                    return None;
                }
                let pos: Vec<i32> = (0..dim).map(|k| 2 * ((key >> (bits as usize * k)) & mask) as i32 + 1).collect();
                let d2: Vec<i32> = (0..n_grid)
                    .map(|j| (0..dim).map(|k| (grid[j * dim + k] as i32 - pos[k]).pow(2)).sum())
                    .collect();
                let mut distinct: Vec<i32> = d2.clone();
                distinct.sort_unstable();
                distinct.dedup();
                let limit = distinct[nwant.min(distinct.len()) - 1];
                let mut near: Vec<(i32, u16)> =
                    d2.iter().enumerate().filter(|(_, &d)| d <= limit).map(|(j, &d)| (d, j as u16)).collect();
                near.sort_unstable();
                let mut list = Vec::with_capacity(near.len() + 1);
                list.push(near.len() as u16);
                list.extend(near.into_iter().map(|(_, j)| j));
                Some(list)
            })
            .collect();
        let mut neighbours = Vec::new();
        for (key, list) in lists.into_iter().enumerate() {
            if let Some(list) = list {
                map[key] = -(neighbours.len() as i32 + 1);
                neighbours.extend(list);
            }
        }
        Lattice { dim, grid, map, neighbours }
    }
}

static TABLES: Mutex<[Option<Arc<Lattice>>; 6]> = Mutex::new([None, None, None, None, None, None]);

fn lock() -> std::sync::MutexGuard<'static, [Option<Arc<Lattice>>; 6]> {
    TABLES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The table of `kind`, built on first use.
pub fn get(kind: TableKind) -> Arc<Lattice> {
    let mut t = lock();
    // BOUNDS: slot() is a position in TableKind::ALL (6 kinds) and `t` has 6 slots.
    t[kind.slot()].get_or_insert_with(|| Arc::new(Lattice::build(kind))).clone()
}

pub fn init(q: QType) {
    if let Some(k) = TableKind::of(q) {
        get(k);
    }
}

/// Drop the table `q` uses (quantizers holding it keep their copy until done).
pub fn free(q: QType) {
    if let Some(k) = TableKind::of(q) {
        // BOUNDS: slot() is a position in TableKind::ALL (6 kinds) and there are 6 slots.
        lock()[k.slot()] = None;
    }
}

pub fn free_all() {
    for t in lock().iter_mut() {
        *t = None;
    }
}

/// Whether the table of `q` is built now.
#[cfg(test)]
pub fn is_built(q: QType) -> bool {
    TableKind::of(q).is_some_and(|k| lock()[k.slot()].is_some())
}
