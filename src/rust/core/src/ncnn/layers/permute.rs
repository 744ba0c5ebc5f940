//! Permute: reorders the axes of a 2-, 3- or 4-d blob. `order_type` names
//! the input axes that become the output's w, h, [d,] c, in that order
//! (e.g. 3 = "CWH" on a 3-d blob: out w = in c, out h = in w, out c = in h).

use super::kernels::transpose::permute;
use crate::ncnn::layer::one;
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

const ORDERS_2: [&str; 2] = ["WH", "HW"];
const ORDERS_3: [&str; 6] = ["WHC", "HWC", "WCH", "CWH", "HCW", "CHW"];
const ORDERS_4: [&str; 24] = [
    "WHDC", "HWDC", "WDHC", "DWHC", "HDWC", "DHWC", "WHCD", "HWCD", "WCHD", "CWHD", "HCWD", "CHWD", "WDCH", "DWCH",
    "WCDH", "CWDH", "DCWH", "CDWH", "HDCW", "DHCW", "HCDW", "CHDW", "DCHW", "CDHW",
];

pub struct Permute {
    order: i32,
}

impl Permute {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Permute> {
        let order = pd.int(0, 0);
        if !(0..24).contains(&order) {
            ncnn_bail!("Permute order_type {order} is not 0 to 23");
        }
        Ok(Permute { order })
    }
}

/// Outermost-first permutation for an order spelled innermost first over
/// `names` (the input's axes, outermost first).
fn perm_of(order: &str, names: &str) -> Vec<usize> {
    order.chars().rev().map(|ch| names.find(ch).unwrap_or(0)).collect()
}

impl Layer for Permute {
    // BOUNDS-FN: o is below each order table's length (match guards); perm is a
    // permutation of the axes (perm_of).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Permute")?;
        let o = self.order as usize;
        let (spelled, names) = match x.dims {
            1 => return Ok(vec![x]),
            2 if o < 2 => (ORDERS_2[o], "HW"),
            3 if o < 6 => (ORDERS_3[o], "CHW"),
            4 if o < 24 => (ORDERS_4[o], "CDHW"),
            d => ncnn_bail!("order_type {o} does not apply to a {d}-d blob ({}): 2-d blobs take 0 or 1, 3-d blobs 0 to 5", x.describe()),
        };
        let perm = perm_of(spelled, names);
        let axes = x.axes();
        let mut data = take_vec(x.total());
        data.resize(x.total(), 0.0);
        permute(&x.data, &axes, &perm, &mut data);
        let oaxes: Vec<usize> = perm.iter().map(|&p| axes[p]).collect();
        let mut out = Mat::from_axes(&oaxes, data)?;
        out.int8 = x.int8;
        Ok(vec![out])
    }
}
