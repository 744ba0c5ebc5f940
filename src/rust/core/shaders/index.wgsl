// Ops that place values by index: one invocation per result element
// (grid-stride loop). OPC: 0 roll, 1 pad_reflect_1d, 2 win_part, 3
// win_unpart, 4 get_rel_pos, 5 add_rel_pos, 6 diag, 7 diag_mask_zero, 8
// arange, 9 timestep_embedding, 10 interpolated upscale (SUBC 1 bicubic), 11
// get_rows_back, 12 repeat_back. Integers from word 56, floats from 50.

fn wrap(i: u32, s: i32, n: u32) -> u32 {
    let m = i32(n);
    return u32(((i32(i) - s) % m + m) % m);
}

fn src_px(x: i32, y: i32, c: vec4<u32>) -> f32 {
    let xx = u32(clamp(x, 0, i32(ne(0u, 0u)) - 1));
    let yy = u32(clamp(y, 0, i32(ne(0u, 1u)) - 1));
    return ld0(idx(0u, vec4<u32>(xx, yy, c.z, c.w)));
}

// Cubic convolution weight (a = -0.75) of a neighbour at distance t.
fn cubic_near(t: f32) -> f32 { return (1.25 * t - 2.25) * t * t + 1.0; }
fn cubic_far(t: f32) -> f32 { return ((-0.75 * t + 3.75) * t - 6.0) * t + 3.0; }

fn interpolate(c: vec4<u32>) -> f32 {
    let f = pf(50u);
    let x = (f32(c.x) + 0.5) / f - 0.5;
    let y = (f32(c.y) + 0.5) / f - 0.5;
    let x0 = floor(x);
    let y0 = floor(y);
    let tx = x - x0;
    let ty = y - y0;
    let ix = i32(x0);
    let iy = i32(y0);
    if (SUBC == 0u) {
        return src_px(ix, iy, c) * (1.0 - tx) * (1.0 - ty) + src_px(ix + 1, iy, c) * tx * (1.0 - ty)
            + src_px(ix, iy + 1, c) * (1.0 - tx) * ty + src_px(ix + 1, iy + 1, c) * tx * ty;
    }
    let wx = vec4<f32>(cubic_far(tx + 1.0), cubic_near(tx), cubic_near(1.0 - tx), cubic_far(2.0 - tx));
    let wy = vec4<f32>(cubic_far(ty + 1.0), cubic_near(ty), cubic_near(1.0 - ty), cubic_far(2.0 - ty));
    var acc = 0.0;
    for (var j = 0; j < 4; j = j + 1) {
        var row = 0.0;
        for (var i = 0; i < 4; i = i + 1) {
            row = row + wx[i] * src_px(ix - 1 + i, iy - 1 + j, c);
        }
        acc = acc + wy[j] * row;
    }
    return acc;
}

fn value(i: u32, c: vec4<u32>) -> f32 {
    let op = OPC;
    switch op {
        case 0u: {
            let cs = vec4<u32>(wrap(c.x, pi(56u), ne(0u, 0u)), wrap(c.y, pi(57u), ne(0u, 1u)),
                wrap(c.z, pi(58u), ne(0u, 2u)), wrap(c.w, pi(59u), ne(0u, 3u)));
            return ld0(idx(0u, cs));
        }
        case 1u: {
            let n = i32(ne(0u, 0u));
            var j = i32(c.x) - pi(56u);
            if (j < 0) { j = -j; } else if (j >= n) { j = 2 * (n - 1) - j; }
            return ld0(idx(0u, vec4<u32>(u32(j), c.y, c.z, c.w)));
        }
        case 2u: {
            let w = P[56u];
            let nx = P[57u];
            let sx = (c.w % nx) * w + c.y;
            let sy = (c.w / nx) * w + c.z;
            if (sx < ne(0u, 1u) && sy < ne(0u, 2u)) {
                return ld0(idx(0u, vec4<u32>(c.x, sx, sy, 0u)));
            }
            return 0.0;
        }
        case 3u: {
            let w = P[56u];
            let nx = P[57u];
            return ld0(idx(0u, vec4<u32>(c.x, c.y % w, c.z % w, (c.z / w) * nx + c.y / w)));
        }
        case 4u: { return ld0(idx(0u, vec4<u32>(c.x, P[56u] - c.y - 1u + c.z, 0u, 0u))); }
        case 5u: {
            let k = ne(1u, 0u);
            let q1 = ne(1u, 1u);
            let i1 = c.y % q1;
            let i2 = c.y / q1;
            return ld0(idx(0u, c)) + ld2(idx(3u, vec4<u32>(c.x / k, i1, i2, c.z)))
                + ld1(idx(1u, vec4<u32>(c.x % k, i1, i2, c.z)));
        }
        case 6u: {
            if (c.x == c.y) { return ld0(idx(0u, vec4<u32>(c.x, 0u, c.z, c.w))); }
            return 0.0;
        }
        case 7u: {
            if (i32(c.x) > pi(56u) + i32(c.y)) { return 0.0; }
            return ld0(idx(0u, c));
        }
        case 8u: { return pf(50u) + f32(i) * pf(51u); }
        case 9u: {
            let half = P[56u];
            if (c.x >= 2u * half) { return 0.0; }
            let j = c.x % half;
            let arg = ld0(idx(0u, vec4<u32>(c.y, 0u, 0u, 0u))) * exp(-pf(50u) * f32(j) / f32(half));
            if (c.x < half) { return cos(arg); }
            return sin(arg);
        }
        case 10u: { return interpolate(c); }
        case 11u: {
            // the gradient rows whose index is this row
            var acc = 0.0;
            let k = ne(1u, 0u);
            for (var t = 0u; t < k; t = t + 1u) {
                let r = bitcast<i32>(raw1(idx(1u, vec4<u32>(t, 0u, 0u, 0u))));
                if (r == i32(c.y)) { acc = acc + ld0(idx(0u, vec4<u32>(c.x, t, 0u, 0u))); }
            }
            return acc;
        }
        case 12u: {
            // this element's repetitions in a
            let d = vec4<u32>(ne(2u, 0u), ne(2u, 1u), ne(2u, 2u), ne(2u, 3u));
            let r = vec4<u32>(ne(0u, 0u), ne(0u, 1u), ne(0u, 2u), ne(0u, 3u)) / d;
            var acc = 0.0;
            for (var t3 = 0u; t3 < r.w; t3 = t3 + 1u) {
                for (var t2 = 0u; t2 < r.z; t2 = t2 + 1u) {
                    for (var t1 = 0u; t1 < r.y; t1 = t1 + 1u) {
                        for (var t0 = 0u; t0 < r.x; t0 = t0 + 1u) {
                            acc = acc + ld0(idx(0u, c + vec4<u32>(t0, t1, t2, t3) * d));
                        }
                    }
                }
            }
            return acc;
        }
        default: { return 0.0; }
    }
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let n = nel(2u);
    let stride = nwg.x * 256u;
    for (var i = gid.x; i < n; i = i + stride) {
        let c = coords(2u, i);
        st(idx(2u, c), value(i, c));
    }
}
