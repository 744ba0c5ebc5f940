// One invocation per result element (grid-stride loop). The constants OPC
// and SUBC (one compiled variant each) select the operation and its
// sub-operation; floats from word 50, integers from 56.

fn safe_tanh(x: f32) -> f32 {
    // Small arguments by the series: 1 - exp(-2|x|) would cancel.
    if (abs(x) < 0.05) {
        let x2 = x * x;
        return x * (1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0);
    }
    let t = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - t) / (1.0 + t);
}

// erf (Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7).
fn erf_f(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return sign(x) * y;
}

// Unary functions, numbered in the order of the engine's UnaryOp::ALL.
fn unary(code: u32, x: f32) -> f32 {
    switch code {
        case 0u: { return -x; }
        case 1u: { return abs(x); }
        case 2u: { return x * x; }
        case 3u: { return sqrt(x); }
        case 4u: { return exp(x); }
        case 5u: { return log(x); }
        case 6u: { return sin(x); }
        case 7u: { return cos(x); }
        case 8u: { return max(x, 0.0); }
        case 9u: {
            return 0.5 * x * (1.0 + safe_tanh(0.7978846 * x * (1.0 + 0.044715 * x * x)));
        }
        case 10u: { return x / (1.0 + exp(-x)); }
        case 11u: { return 1.0 / (1.0 + exp(-x)); }
        case 12u: { return safe_tanh(x); }
        case 13u: {
            if (x > 0.0) { return x; }
            return exp(x) - 1.0;
        }
        case 14u: {
            if (x > 0.0) { return 1.0; }
            return 0.0;
        }
        case 15u: { return x * clamp(x + 3.0, 0.0, 6.0) / 6.0; }
        case 16u: { return clamp((x + 3.0) / 6.0, 0.0, 1.0); }
        case 17u: { return sign(x); }
        case 18u: { return ceil(x); }
        case 19u: { return floor(x); }
        // half away from zero (WGSL's round() goes to even)
        case 20u: { return sign(x) * floor(abs(x) + 0.5); }
        case 21u: { return max(x, 0.0) + log(1.0 + exp(-abs(x))); }
        case 22u: { return 0.5 * x * (1.0 + erf_f(x * 0.70710678)); }
        case 23u: { return x / (1.0 + exp(-1.702 * x)); }
        default: { return x; }
    }
}

fn binary(code: u32, a: f32, b: f32) -> f32 {
    switch code {
        case 0u: { return a + b; }
        case 1u: { return a - b; }
        case 2u: { return a * b; }
        default: { return a / b; }
    }
}

// Copy element `se` of source 0 to element `de` of the result, converting.
fn copy0(de: u32, se: u32) {
    if (dt(0u) == dt(2u)) { st_raw(de, raw0(se)); } else { st(de, ld0(se)); }
}
fn copy1(de: u32, se: u32) {
    if (dt(1u) == dt(2u)) { st_raw(de, raw1(se)); } else { st(de, ld1(se)); }
}

// act(x) * g of GLU kind `kind` (ggml's GGML_GLU_OP_* order); the clamped
// SwiGLU takes alpha and limit from words 50 and 51.
fn glu_apply(kind: u32, x: f32, g: f32) -> f32 {
    switch kind {
        case 0u: { return unary(8u, x) * g; }
        case 1u: { return unary(9u, x) * g; }
        case 2u: { return unary(10u, x) * g; }
        case 3u: {
            let lim = pf(51u);
            let xc = min(x, lim);
            let gc = clamp(g, -lim, lim);
            return xc / (1.0 + exp(-pf(50u) * xc)) * (gc + 1.0);
        }
        case 4u: { return unary(22u, x) * g; }
        default: { return unary(23u, x) * g; }
    }
}

fn im2col(de: u32, c: vec4<u32>) {
    let kw = P[56u];
    let kh = P[57u];
    let is2d = P[58u] != 0u;
    var iic = 0u;
    var ikh = 0u;
    var ikw = 0u;
    var ioh = 0u;
    var inn = 0u;
    if (is2d) {
        iic = c.x / (kh * kw);
        ikh = (c.x % (kh * kw)) / kw;
        ikw = c.x % kw;
        ioh = c.z;
        inn = c.w;
    } else {
        iic = c.x / kw;
        ikw = c.x % kw;
        inn = c.z;
    }
    let iiw = i32(c.y) * pi(50u) + i32(ikw) * pi(54u) - pi(52u);
    let iih = i32(ioh) * pi(51u) + i32(ikh) * pi(55u) - pi(53u);
    var v = 0.0;
    if (is2d) {
        if (iiw >= 0 && iih >= 0 && u32(iiw) < ne(0u, 0u) && u32(iih) < ne(0u, 1u)) {
            v = ld0(idx(0u, vec4<u32>(u32(iiw), u32(iih), iic, inn)));
        }
    } else {
        if (iiw >= 0 && u32(iiw) < ne(0u, 0u)) {
            v = ld0(idx(0u, vec4<u32>(u32(iiw), iic, inn, 0u)));
        }
    }
    st(de, v);
}

fn pool2d(de: u32, c: vec4<u32>) {
    let is_max = SUBC == 0u;
    let k0 = pi(50u);
    let k1 = pi(51u);
    let ix0 = i32(c.x) * pi(52u) - pi(54u);
    let iy0 = i32(c.y) * pi(53u) - pi(55u);
    var acc = 0.0;
    if (is_max) { acc = -3.4028235e38; }
    for (var ky = 0; ky < k1; ky = ky + 1) {
        let iy = iy0 + ky;
        if (iy < 0 || u32(iy) >= ne(0u, 1u)) { continue; }
        for (var kx = 0; kx < k0; kx = kx + 1) {
            let ix = ix0 + kx;
            if (ix < 0 || u32(ix) >= ne(0u, 0u)) { continue; }
            let v = ld0(idx(0u, vec4<u32>(u32(ix), u32(iy), c.z, c.w)));
            if (is_max) { acc = max(acc, v); } else { acc = acc + v; }
        }
    }
    if (!is_max) { acc = acc / f32(k0 * k1); }
    st(de, acc);
}

// Contiguous tensors of one shape (word 59 set by the encoder): element i
// of each is at its offset + i; word 60 marks a one-element second source.
// Everything read from the parameter block is hoisted out of the loop.
fn linear(first: u32, stride: u32, n: u32) {
    let op = OPC;
    let sub = SUBC;
    let f0 = pf(50u);
    let f1 = pf(51u);
    let d0 = dt(0u);
    let d1 = dt(1u);
    let d2 = dt(2u);
    let o0 = P[1u];
    let o1 = P[17u];
    let o2 = P[33u];
    let b_scalar = P[60u] != 0u;
    if (op == 0u && d0 == d2 && !is16(d0)) {
        for (var i = first; i < n; i = i + stride) {
            atomicStore(&D[o2 + i], S0[o0 + i]);
        }
        return;
    }
    for (var i = first; i < n; i = i + stride) {
        let x = ld0t(o0 + i, d0);
        var y = x;
        switch op {
            case 1u: { y = unary(sub, x); }
            case 2u: { y = x * f0; }
            case 3u: { y = max(x, 0.0) + f0 * min(x, 0.0); }
            case 4u: { y = clamp(x, f0, f1); }
            case 5u: {
                var e1 = o1 + i;
                if (b_scalar) { e1 = o1; }
                y = binary(sub, x, ld1t(e1, d1));
            }
            default: {}
        }
        stt(o2 + i, y, d2);
    }
}

fn apply(i: u32) {
    let c = coords(2u, i);
    let de = idx(2u, c);
    let op = OPC;
    switch op {
        // copy / convert (dup, cont, cpy): sources may have another shape
        case 0u: { copy0(de, idx(0u, coords(0u, i))); }
        case 1u: { st(de, unary(SUBC, ld0(idx(0u, c)))); }
        case 2u: { st(de, ld0(idx(0u, c)) * pf(50u)); }
        case 3u: {
            let x = ld0(idx(0u, c));
            st(de, max(x, 0.0) + pf(50u) * min(x, 0.0));
        }
        case 4u: { st(de, clamp(ld0(idx(0u, c)), pf(50u), pf(51u))); }
        case 5u: {
            let cb = c % vec4<u32>(ne(1u, 0u), ne(1u, 1u), ne(1u, 2u), ne(1u, 3u));
            st(de, binary(SUBC, ld0(idx(0u, c)), ld1(idx(1u, cb))));
        }
        // repeat
        case 6u: {
            let ca = c % vec4<u32>(ne(0u, 0u), ne(0u, 1u), ne(0u, 2u), ne(0u, 3u));
            copy0(de, idx(0u, ca));
        }
        // concat along dim P[56]
        case 7u: {
            let dim = P[56u];
            var cc = c;
            let na = ne(0u, dim);
            if (cc[dim] < na) {
                copy0(de, idx(0u, cc));
            } else {
                cc[dim] = cc[dim] - na;
                copy1(de, idx(1u, cc));
            }
        }
        // get_rows: row index from the i32 source 1
        case 8u: {
            let r = bitcast<i32>(raw1(idx(1u, vec4<u32>(c.y, c.z, c.w, 0u))));
            // Indices computed inside the graph are not checked on the host:
            // out-of-range rows read as zeros rather than outside the buffer.
            if (r < 0 || u32(r) >= ne(0u, 1u)) {
                st(de, 0.0);
            } else {
                copy0(de, idx(0u, vec4<u32>(c.x, u32(r), c.z, c.w)));
            }
        }
        // diag_mask_inf with n_past in word 56
        case 9u: {
            if (i32(c.x) > pi(56u) + i32(c.y)) {
                st(de, neg_inf());
            } else {
                copy0(de, idx(0u, c));
            }
        }
        // pad: zeros beyond the source
        case 10u: {
            if (c.x < ne(0u, 0u) && c.y < ne(0u, 1u) && c.z < ne(0u, 2u) && c.w < ne(0u, 3u)) {
                copy0(de, idx(0u, c));
            } else {
                st_raw(de, 0u);
            }
        }
        // nearest upscale of dims 0 and 1 by word 56
        case 11u: {
            let f = P[56u];
            copy0(de, idx(0u, vec4<u32>(c.x / f, c.y / f, c.z, c.w)));
        }
        case 12u: { im2col(de, c); }
        case 13u: { pool2d(de, c); }
        // GLU over the halves of each row; word 56: the gates come first
        case 14u: {
            let n = ne(2u, 0u);
            var xo = 0u;
            var go = n;
            if (P[56u] != 0u) { xo = n; go = 0u; }
            let x = ld0(idx(0u, vec4<u32>(c.x + xo, c.y, c.z, c.w)));
            let g = ld0(idx(0u, vec4<u32>(c.x + go, c.y, c.z, c.w)));
            st(de, glu_apply(SUBC, x, g));
        }
        // GLU of values (source 0) and gates (source 1)
        case 15u: { st(de, glu_apply(SUBC, ld0(idx(0u, c)), ld1(idx(1u, c)))); }
        // silu gradient: dy (source 0) and x (source 1)
        case 16u: {
            let x = ld1(idx(1u, c));
            let s = 1.0 / (1.0 + exp(-x));
            st(de, ld0(idx(0u, c)) * s * (1.0 + x * (1.0 - s)));
        }
        default: {}
    }
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let n = nel(2u);
    let stride = nwg.x * 256u;
    if (P[59u] != 0u) {
        linear(gid.x, stride, n);
    } else {
        for (var i = gid.x; i < n; i = i + stride) {
            apply(i);
        }
    }
}
