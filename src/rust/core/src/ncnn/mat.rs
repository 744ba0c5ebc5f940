//! Mat: a dense fp32 blob of 1 to 4 dimensions, stored c, d, h, w with w fastest.

/// A blob. `dims` is 1 (w), 2 (w, h), 3 (w, h, c) or 4 (w, h, d, c); unused
/// extents are 1. Data are contiguous: channel `q` starts at `q * cstep()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mat {
    pub dims: usize,
    pub w: usize,
    pub h: usize,
    pub d: usize,
    pub c: usize,
    pub data: Vec<f32>,
}

impl Mat {
    pub fn new(dims: usize, w: usize, h: usize, d: usize, c: usize) -> Mat {
        Mat {
            dims,
            w,
            h,
            d,
            c,
            data: vec![0.0; w * h * d * c],
        }
    }
    pub fn new_1d(w: usize) -> Mat {
        Mat::new(1, w, 1, 1, 1)
    }
    pub fn new_2d(w: usize, h: usize) -> Mat {
        Mat::new(2, w, h, 1, 1)
    }
    pub fn new_3d(w: usize, h: usize, c: usize) -> Mat {
        Mat::new(3, w, h, 1, c)
    }
    /// A Mat from extents in R order (w first); 1 to 4 extents.
    pub fn from_shape(shape: &[usize], data: Vec<f32>) -> anyhow::Result<Mat> {
        if shape.is_empty() || shape.len() > 4 {
            crate::ncnn_bail!(
                "a blob has 1 to 4 dimensions (w, h, [d,] c), got {}",
                shape.len()
            );
        }
        let (w, h, d, c) = match shape.len() {
            1 => (shape[0], 1, 1, 1),
            2 => (shape[0], shape[1], 1, 1),
            3 => (shape[0], shape[1], 1, shape[2]),
            _ => (shape[0], shape[1], shape[2], shape[3]),
        };
        let n: usize = shape.iter().product();
        if n != data.len() {
            crate::ncnn_bail!(
                "blob shape {:?} needs {} values, got {}",
                shape,
                n,
                data.len()
            );
        }
        Ok(Mat {
            dims: shape.len(),
            w,
            h,
            d,
            c,
            data,
        })
    }
    /// Extents in R order (w first).
    pub fn shape(&self) -> Vec<usize> {
        match self.dims {
            1 => vec![self.w],
            2 => vec![self.w, self.h],
            3 => vec![self.w, self.h, self.c],
            _ => vec![self.w, self.h, self.d, self.c],
        }
    }
    /// Extents outermost first (c, d, h, w restricted to dims), as ncnn axes count.
    pub fn axes(&self) -> Vec<usize> {
        let mut s = self.shape();
        s.reverse();
        s
    }
    /// A Mat with the same dims from outermost-first extents.
    pub fn from_axes(axes: &[usize], data: Vec<f32>) -> anyhow::Result<Mat> {
        let mut s = axes.to_vec();
        s.reverse();
        Mat::from_shape(&s, data)
    }
    pub fn total(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Elements per channel.
    pub fn cstep(&self) -> usize {
        self.w * self.h * self.d
    }
    pub fn channel(&self, q: usize) -> &[f32] {
        let s = self.cstep();
        &self.data[q * s..(q + 1) * s]
    }
    pub fn shape_eq(&self, o: &Mat) -> bool {
        self.dims == o.dims && self.w == o.w && self.h == o.h && self.d == o.d && self.c == o.c
    }
    /// A description like `3x8x8 (c x h x w)`.
    pub fn describe(&self) -> String {
        let a: Vec<String> = self.shape().iter().map(|v| v.to_string()).collect();
        format!("[{}]", a.join(", "))
    }
}
