// Shared declarations of every compute shader.
//
// build.rs compiles each shader in variants, prefixing the constants OPC
// (operation), SUBC (sub-operation) and ALL_F32 (every tensor is f32), so a
// driver's compiler removes the code a dispatch cannot reach.
//
// Binding 0 holds this dispatch's parameter block (128 words). Words tb(t) ..
// tb(t)+9 describe tensor t (0 = first source, 1 = second source, 2 = result,
// 3 = third source, 4 = fourth source): element type code, element offset,
// four sizes (ne) and four element strides. Words 48..63 and 96..124 hold the
// operation and its parameters; 125..127 the dispatch's grid (grid()). Tensors are read and written as 32-bit words
// whatever their element type, so 16-bit types need no device feature;
// 16-bit results are merged into their word atomically.

@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> S0: array<u32>;
@group(0) @binding(2) var<storage, read> S1: array<u32>;
@group(0) @binding(3) var<storage, read_write> D: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read> S2: array<u32>;
@group(0) @binding(5) var<storage, read> S3: array<u32>;

const DT_F32: u32 = 0u;
const DT_F16: u32 = 1u;
const DT_I32: u32 = 2u;
const DT_BF16: u32 = 3u;
const OPW: u32 = 48u;

// Words 125..127: the whole dispatch's grid of workgroups. A long dispatch
// may run in pieces (vkCmdDispatchBase), each with its own num_workgroups;
// kernels stride their loops by this grid instead, so every piece does
// exactly the work its workgroups do in the whole dispatch.
fn grid() -> vec3<u32> { return vec3<u32>(P[125u], P[126u], P[127u]); }

fn pf(i: u32) -> f32 { return bitcast<f32>(P[i]); }
fn pi(i: u32) -> i32 { return bitcast<i32>(P[i]); }
// First word of tensor t's description.
fn tb(t: u32) -> u32 { return select(t * 16u, t * 16u + 16u, t >= 3u); }
fn dt(t: u32) -> u32 {
    if (ALL_F32) { return DT_F32; }
    return P[tb(t)];
}
fn ne(t: u32, d: u32) -> u32 { return P[tb(t) + 2u + d]; }
fn nel(t: u32) -> u32 { return ne(t, 0u) * ne(t, 1u) * ne(t, 2u) * ne(t, 3u); }

// Element index of coordinates c in tensor t.
fn idx(t: u32, c: vec4<u32>) -> u32 {
    let b = tb(t);
    return P[b + 1u] + c.x * P[b + 6u] + c.y * P[b + 7u] + c.z * P[b + 8u] + c.w * P[b + 9u];
}

// Coordinates of the i-th element (ne0 fastest) of tensor t.
fn coords(t: u32, i: u32) -> vec4<u32> {
    let n0 = ne(t, 0u);
    let n1 = ne(t, 1u);
    let n2 = ne(t, 2u);
    let r1 = i / n0;
    let r2 = r1 / n1;
    return vec4<u32>(i % n0, r1 % n1, r2 % n2, r2 / n2);
}

fn is16(d: u32) -> bool { return d == DT_F16 || d == DT_BF16; }

fn half_of(w: u32, e: u32) -> u32 { return (w >> ((e & 1u) * 16u)) & 0xffffu; }

fn to_f32(bits: u32, d: u32) -> f32 {
    if (d == DT_F32) { return bitcast<f32>(bits); }
    if (d == DT_F16) { return unpack2x16float(bits).x; }
    if (d == DT_I32) { return f32(bitcast<i32>(bits)); }
    return bitcast<f32>(bits << 16u);
}

fn from_f32(v: f32, d: u32) -> u32 {
    if (d == DT_F32) { return bitcast<u32>(v); }
    if (d == DT_F16) { return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu; }
    if (d == DT_I32) {
        // Round half away from zero, as the CPU backend does.
        let t = trunc(v);
        let r = select(t, t + sign(v), abs(v - t) >= 0.5);
        return bitcast<u32>(i32(r));
    }
    let b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

// Raw bits of element e (16-bit types in the low half).
fn raw0(e: u32) -> u32 {
    if (is16(dt(0u))) { return half_of(S0[e >> 1u], e); }
    return S0[e];
}
fn raw1(e: u32) -> u32 {
    if (is16(dt(1u))) { return half_of(S1[e >> 1u], e); }
    return S1[e];
}
fn raw2(e: u32) -> u32 {
    if (is16(dt(3u))) { return half_of(S2[e >> 1u], e); }
    return S2[e];
}
fn raw3(e: u32) -> u32 {
    if (is16(dt(4u))) { return half_of(S3[e >> 1u], e); }
    return S3[e];
}
fn ld0(e: u32) -> f32 { return to_f32(raw0(e), dt(0u)); }
fn ld1(e: u32) -> f32 { return to_f32(raw1(e), dt(1u)); }
fn ld2(e: u32) -> f32 { return to_f32(raw2(e), dt(3u)); }
fn ld3(e: u32) -> f32 { return to_f32(raw3(e), dt(4u)); }
// Value of tensor t (0, 1, 3 or 4: a source) at coordinates c.
fn ldt(t: u32, c: vec4<u32>) -> f32 {
    let e = idx(t, c);
    switch t {
        case 0u: { return ld0(e); }
        case 1u: { return ld1(e); }
        case 3u: { return ld2(e); }
        default: { return ld3(e); }
    }
}

// Loads with the element type given (hoisted out of hot loops).
fn ld0t(e: u32, d: u32) -> f32 {
    if (d == DT_F32) { return bitcast<f32>(S0[e]); }
    if (d == DT_I32) { return f32(bitcast<i32>(S0[e])); }
    let h = half_of(S0[e >> 1u], e);
    if (d == DT_F16) { return unpack2x16float(h).x; }
    return bitcast<f32>(h << 16u);
}
fn ld1t(e: u32, d: u32) -> f32 {
    if (d == DT_F32) { return bitcast<f32>(S1[e]); }
    if (d == DT_I32) { return f32(bitcast<i32>(S1[e])); }
    let h = half_of(S1[e >> 1u], e);
    if (d == DT_F16) { return unpack2x16float(h).x; }
    return bitcast<f32>(h << 16u);
}

fn st_raw(e: u32, bits: u32) {
    if (is16(dt(2u))) {
        let sh = (e & 1u) * 16u;
        let w = e >> 1u;
        atomicAnd(&D[w], ~(0xffffu << sh));
        atomicOr(&D[w], (bits & 0xffffu) << sh);
    } else {
        atomicStore(&D[e], bits);
    }
}
fn st(e: u32, v: f32) { st_raw(e, from_f32(v, dt(2u))); }

// Store with the result's element type given (hoisted out of hot loops).
fn stt(e: u32, v: f32, d: u32) {
    if (d == DT_F32) {
        atomicStore(&D[e], bitcast<u32>(v));
        return;
    }
    let bits = from_f32(v, d);
    if (d == DT_I32) {
        atomicStore(&D[e], bits);
        return;
    }
    let sh = (e & 1u) * 16u;
    let w = e >> 1u;
    atomicAnd(&D[w], ~(0xffffu << sh));
    atomicOr(&D[w], (bits & 0xffffu) << sh);
}

fn neg_inf() -> f32 { return bitcast<f32>(0xff800000u); }

// A matrix product's strides and sizes (words 56..62: A's k and m strides,
// B's k and n strides, K, M, N), shared by the product shaders.
struct Mm { sak: u32, sam: u32, sbk: u32, sbn: u32, k: u32, m: u32, n: u32 }
fn mm_words() -> Mm { return Mm(P[56u], P[57u], P[58u], P[59u], P[60u], P[61u], P[62u]); }

// First index of source t's matrix at the result's batch (i2, i3), batch
// dims broadcast as ggml does.
fn batch_base(t: u32, i2: u32, i3: u32) -> u32 {
    return idx(t, vec4<u32>(0u, 0u, i2 / (ne(2u, 2u) / ne(t, 2u)), i3 / (ne(2u, 3u) / ne(t, 3u))));
}
