// Direct convolutions, 1-D pooling and the expert product: one invocation
// per result element. OPC: 0 conv_transpose_1d, 1 conv_transpose_2d, 2
// depthwise conv_2d, 3 conv_2d, 4 pool_1d (SUBC 1: average), 5 mul_mat_id.
// Source 0 is the kernel (pool_1d: the input; mul_mat_id: the experts),
// source 1 the input (mul_mat_id: b; slot 3 the ids). Integers from word 56:
// strides, paddings, dilations (s0, s1, p0, p1, d0, d1; transposes: s0, p0,
// d0 or the stride; pool: k0, s0, p0).

fn transpose_1d(c: vec4<u32>) -> f32 {
    let s0 = pi(56u);
    let p0 = pi(57u);
    let d0 = pi(58u);
    let kw = ne(0u, 0u);
    let cin = ne(0u, 2u);
    let len = i32(ne(1u, 0u));
    var acc = 0.0;
    for (var k = 0u; k < kw; k = k + 1u) {
        let t = i32(c.x) + p0 - i32(k) * d0;
        if (t < 0 || t % s0 != 0 || t / s0 >= len) { continue; }
        let l = u32(t / s0);
        for (var ic = 0u; ic < cin; ic = ic + 1u) {
            acc = acc + ld1(idx(1u, vec4<u32>(l, ic, c.z, 0u))) * ld0(idx(0u, vec4<u32>(k, c.y, ic, 0u)));
        }
    }
    return acc;
}

fn transpose_2d(c: vec4<u32>) -> f32 {
    let st = P[56u];
    let kw = ne(0u, 0u);
    let kh = ne(0u, 1u);
    let cin = ne(0u, 3u);
    var acc = 0.0;
    for (var ky = 0u; ky < min(kh, c.y + 1u); ky = ky + 1u) {
        let ty = c.y - ky;
        if (ty % st != 0u || ty / st >= ne(1u, 1u)) { continue; }
        for (var kx = 0u; kx < min(kw, c.x + 1u); kx = kx + 1u) {
            let tx = c.x - kx;
            if (tx % st != 0u || tx / st >= ne(1u, 0u)) { continue; }
            for (var ic = 0u; ic < cin; ic = ic + 1u) {
                acc = acc + ld1(idx(1u, vec4<u32>(tx / st, ty / st, ic, c.w)))
                    * ld0(idx(0u, vec4<u32>(kx, ky, c.z, ic)));
            }
        }
    }
    return acc;
}

// depthwise (one kernel per channel, kernel [KW, KH, 1, C]) or full (kernel [KW, KH, Cin, Cout])
fn conv_2d(c: vec4<u32>, depthwise: bool) -> f32 {
    let kw = ne(0u, 0u);
    let kh = ne(0u, 1u);
    let iw = i32(ne(1u, 0u));
    let ih = i32(ne(1u, 1u));
    var c0 = c.z;
    var c1 = c.z + 1u;
    if (!depthwise) {
        c0 = 0u;
        c1 = ne(0u, 2u);
    }
    var acc = 0.0;
    for (var ic = c0; ic < c1; ic = ic + 1u) {
        for (var ky = 0u; ky < kh; ky = ky + 1u) {
            let sy = i32(c.y) * pi(57u) + i32(ky) * pi(61u) - pi(59u);
            if (sy < 0 || sy >= ih) { continue; }
            for (var kx = 0u; kx < kw; kx = kx + 1u) {
                let sx = i32(c.x) * pi(56u) + i32(kx) * pi(60u) - pi(58u);
                if (sx < 0 || sx >= iw) { continue; }
                var kc = vec4<u32>(kx, ky, ic, c.z);
                if (depthwise) { kc = vec4<u32>(kx, ky, 0u, c.z); }
                acc = acc + ld1(idx(1u, vec4<u32>(u32(sx), u32(sy), ic, c.w))) * ld0(idx(0u, kc));
            }
        }
    }
    return acc;
}

fn pool_1d(c: vec4<u32>) -> f32 {
    let k0 = pi(56u);
    let start = i32(c.x) * pi(57u) - pi(58u);
    let n = i32(ne(0u, 0u));
    var acc = 0.0;
    if (SUBC == 0u) { acc = -3.4028235e38; }
    for (var t = max(start, 0); t < min(start + k0, n); t = t + 1) {
        let v = ld0(idx(0u, vec4<u32>(u32(t), c.y, c.z, c.w)));
        if (SUBC == 0u) { acc = max(acc, v); } else { acc = acc + v; }
    }
    if (SUBC == 1u) { acc = acc / f32(k0); }
    return acc;
}

fn mul_mat_id(c: vec4<u32>) -> f32 {
    // result [M, n, T]: expert ids[i, t], column b[., i % nb1, t]
    let e = bitcast<i32>(raw2(idx(3u, vec4<u32>(c.y, c.z, 0u, 0u))));
    if (e < 0 || u32(e) >= ne(0u, 2u)) { return 0.0; }
    let k = ne(0u, 0u);
    let bi = c.y % ne(1u, 1u);
    var acc = 0.0;
    for (var x = 0u; x < k; x = x + 1u) {
        acc = acc + ld0(idx(0u, vec4<u32>(x, c.x, u32(e), 0u))) * ld1(idx(1u, vec4<u32>(x, bi, c.z, 0u)));
    }
    return acc;
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let n = nel(2u);
    let stride = nwg.x * 256u;
    let op = OPC;
    for (var i = gid.x; i < n; i = i + stride) {
        let c = coords(2u, i);
        var v = 0.0;
        switch op {
            case 0u: { v = transpose_1d(c); }
            case 1u: { v = transpose_2d(c); }
            case 2u: { v = conv_2d(c, true); }
            case 3u: { v = conv_2d(c, false); }
            case 4u: { v = pool_1d(c); }
            default: { v = mul_mat_id(c); }
        }
        st(idx(2u, c), v);
    }
}
