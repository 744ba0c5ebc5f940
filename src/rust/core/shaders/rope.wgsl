// Rotary position embedding: one invocation per rotated pair of a row (so
// the op is safe in place), plus one per copied element past n_dims.
// Source 0: a; source 1: i32 positions; source 2 (slot 3): frequency factors.
// Words: 49 n_dims, 50 pairing (0 adjacent, 1 halves, 2 vision), 51 M-RoPE,
// 52 forward (0: inverse rotation), 53 frequency factors given, 54..57
// sections, 58 freq_scale, 59 ext_factor, 60 attn_factor, 61/62 YaRN
// correction dims, 63 theta scale, 96 rotated pairs per row.

// The unscaled angle of pair k for the positions of token plane i2.
fn theta_of(k: u32, i2: u32) -> f32 {
    let n2 = ne(0u, 2u);
    let ts = pf(63u);
    if (P[51u] == 0u) {
        return ld1(idx(1u, vec4<u32>(i2, 0u, 0u, 0u))) * pow(ts, f32(k));
    }
    let s0 = P[54u];
    let s1 = P[55u];
    let s2 = P[56u];
    let total = max(s0 + s1 + s2 + P[57u], 1u);
    let sector = k % total;
    var which = 3u;
    var start = s0 + s1 + s2;
    if (sector < s0) {
        which = 0u;
        start = 0u;
    } else if (sector < s0 + s1) {
        which = 1u;
        start = s0;
    } else if (sector < s0 + s1 + s2) {
        which = 2u;
        start = s0 + s1;
    }
    let p = ld1(idx(1u, vec4<u32>(i2 + which * n2, 0u, 0u, 0u)));
    // the vision mode starts each section's angles again
    var e = k;
    if (P[50u] == 2u) { e = sector - start; }
    return p * pow(ts, f32(e));
}

fn rotate(item: u32, row: u32) {
    let n1 = ne(0u, 1u);
    let n2 = ne(0u, 2u);
    let rc = vec4<u32>(0u, row % n1, (row / n1) % n2, row / (n1 * n2));
    let nd = P[49u];
    let n_pairs = P[96u];
    if (item >= n_pairs) {
        // past the rotated values: copy
        var c = rc;
        c.x = 2u * n_pairs + (item - n_pairs);
        st(idx(2u, c), ld0(idx(0u, c)));
        return;
    }
    let k = item;
    var th = theta_of(k, rc.z);
    if (P[53u] != 0u) { th = th / ld2(idx(3u, vec4<u32>(k, 0u, 0u, 0u))); }
    let fs = pf(58u);
    let ext = pf(59u);
    var angle = fs * th;
    var mscale = pf(60u);
    if (ext != 0.0) {
        let lo = pf(61u);
        let hi = pf(62u);
        let y = (f32(k) - lo) / max(0.001, hi - lo);
        let ramp = (1.0 - clamp(y, 0.0, 1.0)) * ext;
        angle = fs * th * (1.0 - ramp) + th * ramp;
        mscale = mscale * (1.0 + 0.1 * log(1.0 / fs));
    }
    let cs = cos(angle) * mscale;
    var sn = sin(angle) * mscale;
    if (P[52u] == 0u) { sn = -sn; }
    var i = 2u * k;
    var j = 2u * k + 1u;
    if (P[50u] == 1u) {
        i = k;
        j = k + nd / 2u;
    } else if (P[50u] == 2u) {
        i = k;
        j = k + nd;
    }
    var ci = rc;
    ci.x = i;
    var cj = rc;
    cj.x = j;
    let x0 = ld0(idx(0u, ci));
    let x1 = ld0(idx(0u, cj));
    st(idx(2u, ci), x0 * cs - x1 * sn);
    st(idx(2u, cj), x0 * sn + x1 * cs);
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let n0 = ne(0u, 0u);
    let n_pairs = P[96u];
    let per_row = n_pairs + (n0 - 2u * n_pairs);
    let rows = ne(0u, 1u) * ne(0u, 2u) * ne(0u, 3u);
    let n = per_row * rows;
    let stride = nwg.x * 256u;
    for (var i = gid.x; i < n; i = i + stride) {
        rotate(i % per_row, i / per_row);
    }
}
