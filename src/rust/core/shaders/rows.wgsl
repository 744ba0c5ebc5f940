// Row-wise ops. OPC: 0 l2_norm, 1 group_norm, 2 rms_norm_back, 3
// soft_max_back (one invocation per row, or per group of planes), 4 argsort
// and 5 top_k (one invocation per element: its rank among its row, written
// to that position), 6 count_equal (one workgroup). Word 50: eps (the
// softmax: scale); 56: planes per group; 57: descending; 58: k.

var<workgroup> cnt: array<u32, 256>;

fn row_coords(row: u32) -> vec4<u32> {
    let n1 = ne(0u, 1u);
    let n2 = ne(0u, 2u);
    return vec4<u32>(0u, row % n1, (row / n1) % n2, row / (n1 * n2));
}

fn at0(c: vec4<u32>, j: u32) -> f32 { return ld0(idx(0u, vec4<u32>(j, c.y, c.z, c.w))); }
fn at1(c: vec4<u32>, j: u32) -> f32 { return ld1(idx(1u, vec4<u32>(j, c.y, c.z, c.w))); }

fn row_op(row: u32) {
    let c = row_coords(row);
    let n = ne(0u, 0u);
    let eps = pf(50u);
    let op = OPC;
    if (op == 0u) {
        var ss = 0.0;
        for (var j = 0u; j < n; j = j + 1u) { let v = at0(c, j); ss = ss + v * v; }
        let sc = 1.0 / max(sqrt(ss), eps);
        for (var j = 0u; j < n; j = j + 1u) { st(idx(2u, vec4<u32>(j, c.y, c.z, c.w)), at0(c, j) * sc); }
    } else if (op == 2u) {
        // source 0: dy, source 1: x
        var ms = 0.0;
        var xg = 0.0;
        for (var j = 0u; j < n; j = j + 1u) {
            let x = at1(c, j);
            ms = ms + x * x;
            xg = xg + x * at0(c, j);
        }
        let r = 1.0 / sqrt(ms / f32(n) + eps);
        let k = r * r * xg / f32(n);
        for (var j = 0u; j < n; j = j + 1u) {
            st(idx(2u, vec4<u32>(j, c.y, c.z, c.w)), r * (at0(c, j) - at1(c, j) * k));
        }
    } else if (op == 3u) {
        // source 0: dy, source 1: the softmax result y
        var dot = 0.0;
        for (var j = 0u; j < n; j = j + 1u) { dot = dot + at0(c, j) * at1(c, j); }
        for (var j = 0u; j < n; j = j + 1u) {
            st(idx(2u, vec4<u32>(j, c.y, c.z, c.w)), eps * at1(c, j) * (at0(c, j) - dot));
        }
    }
}

// Group g of batch b: planes [g per, min((g + 1) per, ne2)).
fn group_op(g: u32, b: u32) {
    let per = P[56u];
    let c0 = g * per;
    let c1 = min(c0 + per, ne(0u, 2u));
    let n0 = ne(0u, 0u);
    let n1 = ne(0u, 1u);
    let cnt_v = f32((c1 - c0) * n0 * n1);
    var s = 0.0;
    for (var p = c0; p < c1; p = p + 1u) {
        for (var y = 0u; y < n1; y = y + 1u) {
            for (var x = 0u; x < n0; x = x + 1u) { s = s + ld0(idx(0u, vec4<u32>(x, y, p, b))); }
        }
    }
    let mean = s / cnt_v;
    var q = 0.0;
    for (var p = c0; p < c1; p = p + 1u) {
        for (var y = 0u; y < n1; y = y + 1u) {
            for (var x = 0u; x < n0; x = x + 1u) {
                let d = ld0(idx(0u, vec4<u32>(x, y, p, b))) - mean;
                q = q + d * d;
            }
        }
    }
    let inv = 1.0 / sqrt(q / cnt_v + pf(50u));
    for (var p = c0; p < c1; p = p + 1u) {
        for (var y = 0u; y < n1; y = y + 1u) {
            for (var x = 0u; x < n0; x = x + 1u) {
                let cc = vec4<u32>(x, y, p, b);
                st(idx(2u, cc), (ld0(idx(0u, cc)) - mean) * inv);
            }
        }
    }
}

// Whether element j of a row sorts before element i (NaN last, ties by index).
fn before(vj: f32, j: u32, vi: f32, i: u32) -> bool {
    let nj = vj != vj;
    let ni = vi != vi;
    if (nj || ni) {
        if (nj && ni) { return j < i; }
        return ni;
    }
    if (vj == vi) { return j < i; }
    if (P[57u] != 0u) { return vj > vi; }
    return vj < vi;
}

fn rank_op(e: u32) {
    let c = coords(0u, e);
    let n = ne(0u, 0u);
    let v = ld0(idx(0u, c));
    var r = 0u;
    for (var j = 0u; j < n; j = j + 1u) {
        if (before(at0(c, j), j, v, c.x)) { r = r + 1u; }
    }
    if (OPC == 5u && r >= P[58u]) { return; }
    st(idx(2u, vec4<u32>(r, c.y, c.z, c.w)), f32(c.x));
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let stride = nwg.x * 256u;
    let op = OPC;
    if (op == 6u) {
        // one workgroup: each invocation counts a share, then a tree sum
        let n = nel(0u);
        var k = 0u;
        for (var i = lid.x; i < n; i = i + 256u) {
            let c = coords(0u, i);
            var same = false;
            // integers by their bits (exact past 2^24), floats by value
            if (dt(0u) == DT_I32 && dt(1u) == DT_I32) {
                same = raw0(idx(0u, c)) == raw1(idx(1u, c));
            } else {
                same = ld0(idx(0u, c)) == ld1(idx(1u, c));
            }
            if (same) { k = k + 1u; }
        }
        cnt[lid.x] = k;
        workgroupBarrier();
        for (var s = 128u; s > 0u; s = s >> 1u) {
            if (lid.x < s) { cnt[lid.x] = cnt[lid.x] + cnt[lid.x + s]; }
            workgroupBarrier();
        }
        if (lid.x == 0u) { st_raw(idx(2u, vec4<u32>(0u)), cnt[0]); }
        return;
    }
    if (op == 4u || op == 5u) {
        let n = nel(0u);
        for (var i = gid.x; i < n; i = i + stride) { rank_op(i); }
        return;
    }
    if (op == 1u) {
        let groups = (ne(0u, 2u) + P[56u] - 1u) / P[56u];
        let n = groups * ne(0u, 3u);
        for (var i = gid.x; i < n; i = i + stride) { group_op(i % groups, i / groups); }
        return;
    }
    let rows = ne(0u, 1u) * ne(0u, 2u) * ne(0u, 3u);
    for (var i = gid.x; i < rows; i = i + stride) { row_op(i); }
}
