//! Einsum: the sum of products of its bottoms over the indices its equation
//! (param 0, the characters as an int array) leaves out of the result.
//! As in ncnn, the indices are the letters i, j, k, l; each bottom's token
//! names its axes outermost first; the result's axes are i, j, k, l in that
//! order, as many as the right side has letters (each naming an axis of
//! some input), and every other letter is summed over. A letter repeated in one token takes that token's diagonal.

use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Einsum {
    /// Per bottom: the letters (0..4 for i..l) of its axes, outermost first.
    lhs: Vec<Vec<usize>>,
    /// How many leading letters (i, j, ...) the result keeps.
    out_dims: usize,
    equation: String,
}

const LETTERS: &str = "ijkl";

impl Einsum {
    // BOUNDS-FN: LETTERS has 4 ASCII letters and 1 <= out_dims <= 4 is checked first.
    pub fn new(pd: &ParamDict) -> anyhow::Result<Einsum> {
        let codes = pd.ints(0);
        let equation: String = codes.iter().map(|&c| u32::try_from(c).ok().and_then(char::from_u32).unwrap_or('\u{fffd}')).collect();
        let Some((lhs, rhs)) = equation.split_once("->") else {
            ncnn_bail!("Einsum: the equation (param 0) {equation:?} has no '->'; write it as in \"ij,jk->ik\"");
        };
        let letter = |c: char, side: &str| -> anyhow::Result<usize> {
            match LETTERS.find(c) {
                Some(i) => Ok(i),
                None => ncnn_bail!("Einsum: {side} of {equation:?} uses {c:?}; ncnn's Einsum knows only the indices i, j, k and l"),
            }
        };
        let lhs = lhs
            .split(',')
            .map(|t| -> anyhow::Result<Vec<usize>> {
                if t.is_empty() || t.chars().count() > 4 {
                    ncnn_bail!("Einsum: every input of {equation:?} needs 1 to 4 indices, one per axis; got {t:?}");
                }
                t.chars().map(|c| letter(c, "the left side")).collect()
            })
            .collect::<anyhow::Result<Vec<Vec<usize>>>>()?;
        for c in rhs.chars() {
            letter(c, "the right side")?;
        }
        let out_dims = rhs.chars().count();
        if out_dims == 0 || out_dims > 4 {
            ncnn_bail!("Einsum: the right side of {equation:?} needs 1 to 4 indices");
        }
        if rhs != &LETTERS[..out_dims] {
            ncnn_bail!(
                "Einsum: the right side of {equation:?} is {rhs:?}; ncnn's Einsum writes the result's axes as i, j, k, l in order, so write it as {:?} (rename the indices on the left to match)",
                &LETTERS[..out_dims]
            );
        }
        for (l, c) in LETTERS[..out_dims].chars().enumerate() {
            if !lhs.iter().any(|t| t.contains(&l)) {
                ncnn_bail!("Einsum: the result's index {c:?} of {equation:?} names no axis of any input");
            }
        }
        Ok(Einsum { lhs, out_dims, equation })
    }
}

impl Layer for Einsum {
    fn one_blob_only(&self) -> bool {
        false
    }

    // BOUNDS-FN: letters l < 4 (positions in LETTERS) index the [_; 4] size, steps
    // and idx; b < bottoms.len() = steps.len(); p < token.len() = axes.len()
    // (checked); out_dims <= 4; at sums idx[l] < size[l] times each letter's step,
    // an offset inside that bottom.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if bottoms.len() != self.lhs.len() {
            ncnn_bail!("Einsum {:?} takes {} bottoms, got {}", self.equation, self.lhs.len(), bottoms.len());
        }
        // The extent of every letter (1 when no bottom uses it) and, per
        // bottom, the step each letter makes in its data.
        let mut size = [0usize; 4];
        let mut steps = vec![[0usize; 4]; bottoms.len()];
        for (b, (m, token)) in bottoms.iter().zip(&self.lhs).enumerate() {
            let axes = m.axes();
            if axes.len() != token.len() {
                ncnn_bail!("Einsum {:?}: input {} is {} ({} axes) but its indices name {}", self.equation, b + 1, m.describe(), axes.len(), token.len());
            }
            let mut stride = 1;
            for (p, &l) in token.iter().enumerate().rev() {
                if size[l] != 0 && size[l] != axes[p] {
                    ncnn_bail!(
                        "Einsum {:?}: index {:?} has extent {} in one place and {} in input {} ({})",
                        self.equation,
                        LETTERS.as_bytes()[l] as char,
                        size[l],
                        axes[p],
                        b + 1,
                        m.describe()
                    );
                }
                size[l] = axes[p];
                steps[b][l] += stride;
                stride *= axes[p];
            }
        }
        for s in size.iter_mut() {
            *s = (*s).max(1);
        }
        let n_out: usize = size[..self.out_dims].iter().product();
        let n_sum: usize = size[self.out_dims..].iter().product();
        let mut out = take_vec(n_out);
        let mut idx = [0usize; 4];
        for o in 0..n_out {
            let mut rest = o;
            for l in (0..self.out_dims).rev() {
                idx[l] = rest % size[l];
                rest /= size[l];
            }
            let mut sum = 0.0f32;
            for s in 0..n_sum {
                let mut rest = s;
                for l in (self.out_dims..4).rev() {
                    idx[l] = rest % size[l];
                    rest /= size[l];
                }
                let mut v = 1.0f32;
                for (m, st) in bottoms.iter().zip(&steps) {
                    let at: usize = idx.iter().zip(st).map(|(i, s)| i * s).sum();
                    v *= m.data[at];
                }
                sum += v;
            }
            out.push(sum);
        }
        Ok(vec![Mat::from_axes(&size[..self.out_dims], out)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(eq: &str) -> anyhow::Result<Einsum> {
        let codes: Vec<String> = eq.chars().map(|c| (c as u32).to_string()).collect();
        let text = format!("7767517\n1 1\nEinsum e 0 1 x -23300={},{}\n", codes.len(), codes.join(","));
        let spec = crate::ncnn::param::parse_text(&text)?;
        Einsum::new(&spec.layers[0].params)
    }

    #[test]
    fn products_traces_and_refusals() {
        let a = Mat::from_axes(&[2, 3], (0..6).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
        let b = Mat::from_axes(&[3, 2], (0..6).map(|v| v as f32 * 0.5).collect::<Vec<_>>()).unwrap();
        let got = layer("ij,jk->ik").err().expect("a right side out of order is refused");
        assert!(got.to_string().contains("\"ij\""), "{got}");
        let e = layer("ik,kj->ij").unwrap();
        let r = e.forward(vec![a.clone(), b.clone()], 1, &Opt::default()).unwrap();
        assert_eq!(r[0].axes(), vec![2, 2]);
        // [[0,1,2],[3,4,5]] x [[0,.5],[1,1.5],[2,2.5]]
        assert_eq!(&r[0].data[..], &[5.0, 6.5, 14.0, 20.0]);
        let sq = Mat::from_axes(&[3, 3], (0..9).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
        let t = layer("ij->i").unwrap().forward(vec![sq.clone()], 1, &Opt::default()).unwrap();
        assert_eq!(&t[0].data[..], &[3.0, 12.0, 21.0]);
        assert!(layer("jj->i").is_err());
        let d = layer("ii->i").unwrap().forward(vec![sq], 1, &Opt::default()).unwrap();
        assert_eq!(&d[0].data[..], &[0.0, 4.0, 8.0]);
        assert!(layer("ab->a").is_err());
        assert!(layer("ij").is_err());
        let bad = layer("ij,ij->i").unwrap().forward(vec![a, b], 1, &Opt::default()).unwrap_err();
        assert!(bad.to_string().contains("extent"), "{bad}");
    }
}
