// Products and row lookups of quantized weights: source 0 holds ggml's
// blocks, addressed in bytes (its offset and strides in words tb(0)+1.. are
// byte counts; nb0 is the block's size), and is dequantized here value by
// value. OPC is the weights' ggml type code, one variant per type.
// SUBC 0: mul_mat, dst[m, n, i2, i3] = sum_k A(k, m) * B(k, n); each
// invocation keeps one row of A against four columns of B in registers.
// Words: 56 A's block stride (bytes), 57 A's row stride (bytes), 58 B's k
// stride, 59 B's n stride (elements), 60 K, 61 M, 62 N, 63 the block size.
// SUBC 1: get_rows, one invocation per result value, row indices in source 1.
// The IQ types of lattice grids (IQ1_*, IQ2_*, IQ3_*) read their grid from
// binding 4 (S2, encode_q.rs's lattice_table): 64-bit entries as two words.

// Byte `a` of the weights.
fn qb(a: u32) -> u32 { return (S0[a >> 2u] >> ((a & 3u) * 8u)) & 0xffu; }
// The byte as a signed value.
fn qi8(a: u32) -> f32 { return f32(bitcast<i32>(qb(a) << 24u) >> 24u); }
// The f16 at byte a (any alignment).
fn qh16(a: u32) -> f32 { return unpack2x16float(qb(a) | (qb(a + 1u) << 8u)).x; }
fn qu32(a: u32) -> u32 { return qb(a) | (qb(a + 1u) << 8u) | (qb(a + 2u) << 16u) | (qb(a + 3u) << 24u); }
// Nibble j of a 32-value block whose 16 bytes start at a: value j in the low
// half of byte j, value j + 16 in the high half of byte j - 16.
fn nib32(a: u32, j: u32) -> u32 { return (qb(a + (j & 15u)) >> ((j >> 4u) * 4u)) & 15u; }

// IQ4_NL / IQ4_XS values, and twice the E2M1 values of MXFP4 / NVFP4.
var<private> KV_IQ4: array<i32, 16> = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
var<private> KV_FP4: array<i32, 16> = array<i32, 16>(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

// Scale and min `j` (0..7) of the 12 packed 6-bit pairs at a (Q4_K, Q5_K).
fn scale_min_k4(a: u32, j: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(qb(a + j) & 63u), f32(qb(a + j + 4u) & 63u));
    }
    let s = (qb(a + j + 4u) & 15u) | ((qb(a + j - 4u) >> 6u) << 4u);
    let m = (qb(a + j + 4u) >> 4u) | ((qb(a + j) >> 6u) << 4u);
    return vec2<f32>(f32(s), f32(m));
}

// Signed 6-bit scale `j` (0..15) of a Q3_K block's 12 scale bytes at a.
fn q3_scale(a: u32, j: u32) -> f32 {
    let lo = select(qb(a + j) & 15u, qb(a + j - 8u) >> 4u, j >= 8u);
    let hi = (qb(a + 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u;
    return f32(i32(lo | (hi << 4u)) - 32);
}

// Half the value of an E8M0 exponent byte.
fn e8m0_half(e: u32) -> f32 {
    if (e < 2u) { return bitcast<f32>(0x00200000u << e); }
    return bitcast<f32>((e - 1u) << 23u);
}

// Half the value of an unsigned E4M3 byte (0 and 0x7F read as 0).
fn ue4m3_half(x: u32) -> f32 {
    if (x == 0u || x == 0x7fu) { return 0.0; }
    let ex = (x >> 3u) & 15u;
    let man = f32(x & 7u);
    if (ex == 0u) { return man * exp2(-10.0); }
    return (1.0 + man / 8.0) * exp2(f32(i32(ex) - 8));
}

// Trit of a TQ1_0 byte at power-of-three position p: -1, 0 or 1.
fn trit(b: u32, p: u32) -> f32 {
    var pw = 1u;
    for (var i = 0u; i < p; i = i + 1u) { pw = pw * 3u; }
    let q = (b * pw) & 0xffu;
    return f32(i32((q * 3u) >> 8u) - 1);
}

// Byte jj (0..7) of 64-bit grid entry i; byte jj (0..3) of 32-bit entry i.
fn grid8(i: u32, jj: u32) -> u32 { return (S2[2u * i + (jj >> 2u)] >> ((jj & 3u) * 8u)) & 0xffu; }
fn grid4(i: u32, jj: u32) -> u32 { return (S2[i] >> (jj * 8u)) & 0xffu; }
// Sign pattern k (0..127) of IQ2 / IQ3: bit 7 makes the count of set bits even.
fn ksigns(k: u32) -> u32 { return k | ((countOneBits(k) & 1u) << 7u); }
// +-1 as bit jj of s is clear or set.
fn sgn(s: u32, jj: u32) -> f32 { return select(1.0, -1.0, ((s >> jj) & 1u) != 0u); }
// An IQ1 grid byte (-1, 0 or 1) at entry i, byte jj.
fn grid1(i: u32, jj: u32) -> f32 { return f32(bitcast<i32>(grid8(i, jj) << 24u) >> 24u); }

// Value j of a lattice IQ block at byte a (8 sub-blocks of 32 values, each 4
// groups of 8: ib, l, jj).
fn deq_lattice(a: u32, j: u32) -> f32 {
    let ib = j >> 5u;
    let l = (j >> 3u) & 3u;
    let jj = j & 7u;
    // IQ2_XXS: d qs[64]: per sub-block 4 grid bytes, then 4 x 7 sign bits and a 4-bit scale
    if (OPC == 16u) {
        let a1 = qu32(a + 6u + 8u * ib);
        let db = qh16(a) * (0.5 + f32(a1 >> 28u)) * 0.25;
        let g = grid8(qb(a + 2u + 8u * ib + l), jj);
        return db * f32(g) * sgn(ksigns((a1 >> (7u * l)) & 127u), jj);
    }
    // IQ2_XS: d qs[32] (u16: 9-bit grid index, 7 sign bits) scales[8] (two 4-bit)
    if (OPC == 17u) {
        let sc = (qb(a + 66u + ib) >> (4u * (l >> 1u))) & 15u;
        let db = qh16(a) * (0.5 + f32(sc)) * 0.25;
        let q = qb(a + 2u + 8u * ib + 2u * l) | (qb(a + 3u + 8u * ib + 2u * l) << 8u);
        return db * f32(grid8(q & 511u, jj)) * sgn(ksigns(q >> 9u), jj);
    }
    // IQ2_S: d qs[32] signs[32] qh[8] scales[8]; 10-bit grid indices
    if (OPC == 22u) {
        let sc = (qb(a + 74u + ib) >> (4u * (l >> 1u))) & 15u;
        let db = qh16(a) * (0.5 + f32(sc)) * 0.25;
        let i = qb(a + 2u + 4u * ib + l) | (((qb(a + 66u + ib) >> (2u * l)) & 3u) << 8u);
        return db * f32(grid8(i, jj)) * sgn(qb(a + 34u + 4u * ib + l), jj);
    }
    // IQ3_XXS: d qs[64] (grid bytes) then per sub-block a u32 of 4 x 7 sign bits and a 4-bit scale
    if (OPC == 18u) {
        let aux = qu32(a + 66u + 4u * ib);
        let db = qh16(a) * (0.5 + f32(aux >> 28u)) * 0.5;
        let g = grid4(qb(a + 2u + 8u * ib + 2u * l + (jj >> 2u)), jj & 3u);
        return db * f32(g) * sgn(ksigns((aux >> (7u * l)) & 127u), jj);
    }
    // IQ3_S: d qs[64] qh[8] signs[32] scales[4]; 9-bit grid indices
    if (OPC == 21u) {
        let s4 = (qb(a + 106u + (ib >> 1u)) >> (4u * (ib & 1u))) & 15u;
        let db = qh16(a) * f32(1u + 2u * s4);
        let h = (qb(a + 66u + ib) >> (2u * l + (jj >> 2u))) & 1u;
        let i = qb(a + 2u + 8u * ib + 2u * l + (jj >> 2u)) | (h << 8u);
        return db * f32(grid4(i, jj & 3u)) * sgn(qb(a + 74u + 4u * ib + l), jj);
    }
    // IQ1_S: d qs[32] qh[8] (u16: 4 x 3 index bits, a 3-bit scale, the delta's sign)
    if (OPC == 19u) {
        let qh = qb(a + 34u + 2u * ib) | (qb(a + 35u + 2u * ib) << 8u);
        let dl = qh16(a) * f32(2u * ((qh >> 12u) & 7u) + 1u);
        let delta = select(0.125, -0.125, (qh & 0x8000u) != 0u);
        let i = qb(a + 2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8u);
        return dl * (grid1(i, jj) + delta);
    }
    // IQ1_M: qs[32] qh[16] scales[8] (4 u16: 3-bit scales, the f16 scale in their top nibbles)
    if (OPC == 29u) {
        let s0 = qb(a + 48u) | (qb(a + 49u) << 8u);
        let s1 = qb(a + 50u) | (qb(a + 51u) << 8u);
        let s2 = qb(a + 52u) | (qb(a + 53u) << 8u);
        let s3 = qb(a + 54u) | (qb(a + 55u) << 8u);
        let bits = (s0 >> 12u) | ((s1 >> 8u) & 0xf0u) | ((s2 >> 4u) & 0xf00u) | (s3 & 0xf000u);
        let d = unpack2x16float(bits).x;
        let s = qb(a + 48u + 2u * (ib >> 1u)) | (qb(a + 49u + 2u * (ib >> 1u)) << 8u);
        let dl = d * f32(2u * ((s >> (6u * (ib & 1u) + 3u * (l >> 1u))) & 7u) + 1u);
        let h = qb(a + 32u + 2u * ib + (l >> 1u)) >> (4u * (l & 1u));
        let i = qb(a + 4u * ib + l) | ((h & 7u) << 8u);
        let delta = select(0.125, -0.125, (h & 8u) != 0u);
        return dl * (grid1(i, jj) + delta);
    }
    return 0.0;
}

// Value j of the block starting at byte a.
fn deq(a: u32, j: u32) -> f32 {
    if (OPC == 16u || OPC == 17u || OPC == 18u || OPC == 19u || OPC == 21u || OPC == 22u || OPC == 29u) {
        return deq_lattice(a, j);
    }
    // Q4_0: d qs[16]
    if (OPC == 2u) { return f32(i32(nib32(a + 2u, j)) - 8) * qh16(a); }
    // Q4_1: d m qs[16]
    if (OPC == 3u) { return f32(nib32(a + 4u, j)) * qh16(a) + qh16(a + 2u); }
    // Q5_0: d qh[4] qs[16]; bit j of qh is bit 4 of value j
    if (OPC == 6u) {
        let v = nib32(a + 6u, j) | (((qu32(a + 2u) >> j) & 1u) << 4u);
        return f32(i32(v) - 16) * qh16(a);
    }
    // Q5_1: d m qh[4] qs[16]
    if (OPC == 7u) {
        let v = nib32(a + 8u, j) | (((qu32(a + 4u) >> j) & 1u) << 4u);
        return f32(v) * qh16(a) + qh16(a + 2u);
    }
    // Q8_0: d qs[32]; Q8_1: d s qs[32]
    if (OPC == 8u) { return qi8(a + 2u + j) * qh16(a); }
    if (OPC == 9u) { return qi8(a + 4u + j) * qh16(a); }
    // Q2_K: scales[16] qs[64] d dmin; per 128 values, 4 shifts of 2 halves of 16
    if (OPC == 10u) {
        let n = j >> 7u;
        let r = j & 127u;
        let sc = qb(a + n * 8u + (r >> 4u));
        let q = (qb(a + 16u + 32u * n + (r & 31u)) >> (2u * (r >> 5u))) & 3u;
        return qh16(a + 80u) * f32(sc & 15u) * f32(q) - qh16(a + 82u) * f32(sc >> 4u);
    }
    // Q3_K: hmask[32] qs[64] scales[12] d; a clear hmask bit subtracts 4
    if (OPC == 11u) {
        let n = j >> 7u;
        let r = j & 127u;
        let s = r >> 5u;
        let k = r & 31u;
        let q = (qb(a + 32u + 32u * n + k) >> (2u * s)) & 3u;
        let hi = select(4, 0, ((qb(a + k) >> (4u * n + s)) & 1u) != 0u);
        return qh16(a + 108u) * q3_scale(a + 96u, n * 8u + (r >> 4u)) * f32(i32(q) - hi);
    }
    // Q4_K: d dmin scales[12] qs[128]; 4 groups of 64, low then high nibbles
    if (OPC == 12u) {
        let g = j >> 6u;
        let r = j & 63u;
        let sm = scale_min_k4(a + 4u, 2u * g + (r >> 5u));
        let q = (qb(a + 16u + 32u * g + (r & 31u)) >> (4u * (r >> 5u))) & 15u;
        return qh16(a) * sm.x * f32(q) - qh16(a + 2u) * sm.y;
    }
    // Q5_K: d dmin scales[12] qh[32] qs[128]
    if (OPC == 13u) {
        let g = j >> 6u;
        let r = j & 63u;
        let i = r & 31u;
        let sub = 2u * g + (r >> 5u);
        let sm = scale_min_k4(a + 4u, sub);
        let q = ((qb(a + 48u + 32u * g + i) >> (4u * (r >> 5u))) & 15u) | (((qb(a + 16u + i) >> sub) & 1u) << 4u);
        return qh16(a) * sm.x * f32(q) - qh16(a + 2u) * sm.y;
    }
    // Q6_K: ql[128] qh[64] scales[16] (i8) d; per 128 values, 4 quarters of 32
    if (OPC == 14u) {
        let g = j >> 7u;
        let r = j & 127u;
        let qt = r >> 5u;
        let i = r & 31u;
        let lo = (qb(a + 64u * g + i + 32u * (qt & 1u)) >> (4u * (qt >> 1u))) & 15u;
        let hi = (qb(a + 128u + 32u * g + i) >> (2u * qt)) & 3u;
        let sc = qi8(a + 192u + 8u * g + (i >> 4u) + 2u * qt);
        return qh16(a + 208u) * sc * f32(i32(lo | (hi << 4u)) - 32);
    }
    // Q8_K: d (f32) qs[256] bsums[16]
    if (OPC == 15u) { return qi8(a + 4u + j) * bitcast<f32>(qu32(a)); }
    // IQ4_NL: d qs[16], codes into KV_IQ4
    if (OPC == 20u) { return qh16(a) * f32(KV_IQ4[nib32(a + 2u, j)]); }
    // IQ4_XS: d scales_h (u16) scales_l[4] qs[128]; 8 blocks of 32
    if (OPC == 23u) {
        let ib = j >> 5u;
        let lo = (qb(a + 4u + (ib >> 1u)) >> (4u * (ib & 1u))) & 15u;
        let hi = ((qb(a + 2u) | (qb(a + 3u) << 8u)) >> (2u * ib)) & 3u;
        let dl = qh16(a) * f32(i32(lo | (hi << 4u)) - 32);
        return dl * f32(KV_IQ4[nib32(a + 8u + 16u * ib, j & 31u)]);
    }
    // TQ1_0: qs[48] (5 trits a byte: 32 bytes x 5, then 16 bytes x 5) qh[4] (4 trits) d
    if (OPC == 34u) {
        var t = 0.0;
        if (j < 160u) {
            t = trit(qb(a + (j & 31u)), j >> 5u);
        } else if (j < 240u) {
            t = trit(qb(a + 32u + ((j - 160u) & 15u)), (j - 160u) >> 4u);
        } else {
            t = trit(qb(a + 48u + ((j - 240u) & 3u)), (j - 240u) >> 2u);
        }
        return t * qh16(a + 52u);
    }
    // TQ2_0: qs[64] d; per 128 values, 4 shifts of 32
    if (OPC == 35u) {
        let g = j >> 7u;
        let r = j & 127u;
        let q = (qb(a + 32u * g + (r & 31u)) >> (2u * (r >> 5u))) & 3u;
        return f32(i32(q) - 1) * qh16(a + 64u);
    }
    // MXFP4: e (E8M0) qs[16]
    if (OPC == 39u) { return f32(KV_FP4[nib32(a + 1u, j)]) * e8m0_half(qb(a)); }
    // NVFP4: 4 scales (UE4M3) qs[32]; 4 sub-blocks of 16, 8 bytes each
    if (OPC == 40u) {
        let s = j >> 4u;
        let r = j & 15u;
        let q = (qb(a + 4u + 8u * s + (r & 7u)) >> (4u * (r >> 3u))) & 15u;
        return f32(KV_FP4[q]) * ue4m3_half(qb(a + s));
    }
    // Q1_0: d qs[16], one sign bit per value
    if (OPC == 41u) {
        let d = qh16(a);
        return select(-d, d, ((qb(a + 2u + (j >> 3u)) >> (j & 7u)) & 1u) != 0u);
    }
    return 0.0;
}

fn mul_mat(gid: u32, stride: u32, bz: u32) {
    let q = mm_words();
    let bs = P[63u];
    let db = dt(1u);
    let i2 = bz % ne(2u, 2u);
    let i3 = bz / ne(2u, 2u);
    let abase = batch_base(0u, i2, i3);
    let bbase = batch_base(1u, i2, i3);
    let tasks = q.m * ((q.n + 3u) / 4u);
    for (var t = gid; t < tasks; t = t + stride) {
        let m = t % q.m;
        let n0 = (t / q.m) * 4u;
        let arow = abase + m * q.sam;
        // Columns past the edge read the last valid one; their sums are never stored.
        let cols = vec4<u32>(n0, min(n0 + 1u, q.n - 1u), min(n0 + 2u, q.n - 1u), min(n0 + 3u, q.n - 1u));
        let bc = vec4<u32>(bbase) + cols * q.sbn;
        var c = vec4<f32>(0.0);
        for (var kb = 0u; kb * bs < q.k; kb = kb + 1u) {
            let blk = arow + kb * q.sak;
            for (var j = 0u; j < bs; j = j + 1u) {
                let kk = (kb * bs + j) * q.sbk;
                let v = deq(blk, j);
                c = fma(vec4<f32>(v), vec4<f32>(ld1t(bc.x + kk, db), ld1t(bc.y + kk, db), ld1t(bc.z + kk, db), ld1t(bc.w + kk, db)), c);
            }
        }
        for (var i = 0u; i < 4u; i = i + 1u) {
            if (n0 + i >= q.n) { break; }
            st(idx(2u, vec4<u32>(m, n0 + i, i2, i3)), c[i]);
        }
    }
}

fn get_rows(gid: u32, stride: u32) {
    let bs = P[63u];
    let b = tb(0u);
    for (var i = gid; i < nel(2u); i = i + stride) {
        let c = coords(2u, i);
        let r = bitcast<i32>(raw1(idx(1u, vec4<u32>(c.y, c.z, c.w, 0u))));
        // Indices computed inside the graph are not checked on the host:
        // out-of-range rows read as zeros rather than outside the buffer.
        if (r < 0 || u32(r) >= ne(0u, 1u)) {
            st(idx(2u, c), 0.0);
            continue;
        }
        let a = P[b + 1u] + (c.x / bs) * P[b + 6u] + u32(r) * P[b + 7u] + c.z * P[b + 8u] + c.w * P[b + 9u];
        st(idx(2u, c), deq(a, c.x % bs));
    }
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let gid = wid.x * 256u + lid.x;
    let stride = nwg.x * 256u;
    if (SUBC == 1u) {
        if (wid.z == 0u) { get_rows(gid, stride); }
        return;
    }
    for (var bz = wid.z; bz < ne(2u, 2u) * ne(2u, 3u); bz = bz + nwg.z) {
        mul_mat(gid, stride, bz);
    }
}
