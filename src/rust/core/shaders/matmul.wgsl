// dst[m, n, i2, i3] = sum_k A(k, m) * B(k, n), tiled 16 x 16 through shared
// memory (a small kernel that every driver compiles quickly). A and B are addressed with the strides in words 56..59, so one
// shader serves mul_mat (A = a[K, M]) and out_prod (A = a[M, K] read
// transposed). Batch dims 2 and 3 of the sources broadcast over the result's.
// Words: 56 A's k stride, 57 A's m stride, 58 B's k stride, 59 B's n stride,
// 60 K, 61 M, 62 N.

var<workgroup> As: array<f32, 256>;
var<workgroup> Bs: array<f32, 256>;

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let sak = P[56u];
    let sam = P[57u];
    let sbk = P[58u];
    let sbn = P[59u];
    let K = P[60u];
    let M = P[61u];
    let N = P[62u];
    let da = dt(0u);
    let db = dt(1u);
    let tm = (M + 15u) / 16u;
    let tn = (N + 15u) / 16u;
    let d2 = ne(2u, 2u);
    let d3 = ne(2u, 3u);
    let ra2 = d2 / ne(0u, 2u);
    let ra3 = d3 / ne(0u, 3u);
    let rb2 = d2 / ne(1u, 2u);
    let rb3 = d3 / ne(1u, 3u);
    for (var bz = wid.z; bz < d2 * d3; bz = bz + nwg.z) {
        let i2 = bz % d2;
        let i3 = bz / d2;
        let abase = idx(0u, vec4<u32>(0u, 0u, i2 / ra2, i3 / ra3));
        let bbase = idx(1u, vec4<u32>(0u, 0u, i2 / rb2, i3 / rb3));
        for (var ty = wid.y; ty < tn; ty = ty + nwg.y) {
            for (var tx = wid.x; tx < tm; tx = tx + nwg.x) {
                var acc = 0.0;
                for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
                    let k = k0 + lid.x;
                    let am = tx * 16u + lid.y;
                    let bn = ty * 16u + lid.y;
                    var av = 0.0;
                    var bv = 0.0;
                    if (k < K && am < M) { av = ld0t(abase + k * sak + am * sam, da); }
                    if (k < K && bn < N) { bv = ld1t(bbase + k * sbk + bn * sbn, db); }
                    As[lid.x * 16u + lid.y] = av;
                    Bs[lid.x * 16u + lid.y] = bv;
                    workgroupBarrier();
                    for (var kk = 0u; kk < 16u; kk = kk + 1u) {
                        acc = acc + As[kk * 16u + lid.x] * Bs[kk * 16u + lid.y];
                    }
                    workgroupBarrier();
                }
                let m = tx * 16u + lid.x;
                let n = ty * 16u + lid.y;
                if (m < M && n < N) {
                    st(idx(2u, vec4<u32>(m, n, i2, i3)), acc);
                }
            }
        }
    }
}
