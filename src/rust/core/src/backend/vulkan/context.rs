//! One `VkContext` per physical device: instance, logical device, compute
//! queue, memory allocator, pipeline cache and submission counter. Contexts
//! are created once and shared (`Arc`); a global map keeps a `Weak` to each so
//! later users get the same context while any user holds it, and the device
//! is released when the last holder (backend or buffer) goes.

use super::device::{self, DeviceInfo};
use crate::base::fmt::fmt_bytes;
use super::shaders::Pipelines;
use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

static CONTEXTS: OnceLock<Mutex<HashMap<usize, Weak<VkContext>>>> = OnceLock::new();

/// The process that first opened a Vulkan device (0: none yet). A forked
/// child inherits the driver's state but not its threads, so it must not
/// use a device its parent opened, nor open a new one on that driver.
static OPENED_BY: AtomicU32 = AtomicU32::new(0);

fn forked_message() -> String {
    "Vulkan was started in the parent R process before it forked (parallel::mclapply() \
     and similar); a forked child cannot use the Vulkan driver. Use the CPU backend in \
     the child, or workers that start fresh (parallel::makeCluster(), type \"PSOCK\")"
        .to_string()
}

/// An error when this process is a fork of one that opened a Vulkan device.
pub(crate) fn check_not_forked() -> crate::Result<()> {
    let by = OPENED_BY.load(Ordering::SeqCst);
    anyhow::ensure!(by == 0 || by == crate::base::threads::pid(), "{}", forked_message());
    Ok(())
}

/// What recording needs exclusive use of: the command buffer and its fence.
pub(crate) struct Submitter {
    pub pool: vk::CommandPool,
    pub cmd: vk::CommandBuffer,
    pub fence: vk::Fence,
}

pub struct VkContext {
    pub(crate) info: DeviceInfo,
    pub(crate) instance: ash::Instance,
    pub(crate) pd: vk::PhysicalDevice,
    pub(crate) device: ash::Device,
    pub(crate) queue: vk::Queue,
    pub(crate) allocator: ManuallyDrop<Mutex<Allocator>>,
    pub(crate) submitter: Mutex<Submitter>,
    pub(crate) pipelines: Pipelines,
    pub(crate) force_staging: AtomicBool,
    group_cap: AtomicU32,
    submissions: AtomicU64,
    barriers: AtomicU64,
    /// Measured device time per workgroup of each shader variant: sizes
    /// the batches of long graphs (see `graph.rs`).
    pub(crate) speeds: Mutex<super::batch::Speeds>,
    lost: AtomicBool,
    /// The process that created the device (see [`check_not_forked`]).
    pid: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl VkContext {
    /// The context of device `device`, created on first use and shared after.
    pub fn get(device: usize) -> crate::Result<Arc<VkContext>> {
        check_not_forked()?;
        let info = device::device_info(device)?.clone();
        let map = CONTEXTS.get_or_init(|| Mutex::new(HashMap::new()));
        let mut map = lock(map);
        if let Some(ctx) = map.get(&device).and_then(Weak::upgrade) {
            if !ctx.is_lost() {
                return Ok(ctx);
            }
        }
        let ctx = Arc::new(VkContext::create(info)?);
        map.insert(device, Arc::downgrade(&ctx));
        Ok(ctx)
    }

    /// True while the shared context of `device` exists, i.e. some backend
    /// or buffer still uses it.
    pub fn is_open(device: usize) -> bool {
        CONTEXTS.get().is_some_and(|m| lock(m).get(&device).is_some_and(|w| w.strong_count() > 0))
    }

    /// A context of its own (not shared through `get`), for tests that
    /// change its settings.
    #[doc(hidden)]
    pub fn unshared(device: usize) -> crate::Result<Arc<VkContext>> {
        Ok(Arc::new(VkContext::create(device::device_info(device)?.clone())?))
    }

    fn create(info: DeviceInfo) -> crate::Result<VkContext> {
        check_not_forked()?;
        let _ = OPENED_BY.compare_exchange(0, crate::base::threads::pid(), Ordering::SeqCst, Ordering::SeqCst);
        let name = info.name.clone();
        let fail = |what: &str, e: vk::Result| {
            anyhow::anyhow!("Vulkan device '{name}': {what} failed ({e}); use the CPU backend")
        };
        let entry = device::entry().map_err(anyhow::Error::msg)?;
        let instance = device::create_instance(entry).map_err(anyhow::Error::msg)?;
        // From here on, `instance` must be destroyed on every error path.
        let guard = InstanceGuard(Some(instance));
        // INVARIANT: the guard was built with Some just above.
        let instance = guard.0.as_ref().unwrap();
        // SAFETY: the instance is valid; handles below come from it.
        let pds = unsafe { instance.enumerate_physical_devices() }
            .map_err(|e| fail("enumerating devices", e))?;
        let pd = *pds
            .get(info.index)
            .ok_or_else(|| anyhow::anyhow!("Vulkan device {} ('{name}') is no longer present", info.index))?;
        // SAFETY: `pd` comes from `instance`.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or_else(|| anyhow::anyhow!("Vulkan device '{name}' has no compute queue; use the CPU backend"))?
            as u32;
        let prio = [1.0f32];
        let qinfo = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&prio)];
        let dinfo = vk::DeviceCreateInfo::default().queue_create_infos(&qinfo);
        // SAFETY: the create infos outlive the call.
        let device = unsafe { instance.create_device(pd, &dinfo, None) }
            .map_err(|e| fail("creating the logical device", e))?;
        // SAFETY: queue 0 of `family` was requested above.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let made = (|| -> Result<(Submitter, Allocator), anyhow::Error> {
            let pinfo = vk::CommandPoolCreateInfo::default()
                .queue_family_index(family)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
            // SAFETY: valid device; objects are destroyed in Drop or below on error.
            let pool = unsafe { device.create_command_pool(&pinfo, None) }
                .map_err(|e| fail("creating a command pool", e))?;
            let ainfo = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            // SAFETY: `pool` was created on this device just above and is used by no other thread yet.
            let cmd = unsafe { device.allocate_command_buffers(&ainfo) }
                .map_err(|e| {
                    unsafe { device.destroy_command_pool(pool, None) };
                    fail("allocating a command buffer", e)
                })?[0];
            // SAFETY: a valid device; the fence is destroyed in Drop or on the error paths below.
            let fence = unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }
                .map_err(|e| {
                    unsafe { device.destroy_command_pool(pool, None) };
                    fail("creating a fence", e)
                })?;
            let allocator = Allocator::new(&AllocatorCreateDesc {
                instance: instance.clone(),
                device: device.clone(),
                physical_device: pd,
                debug_settings: Default::default(),
                buffer_device_address: false,
                allocation_sizes: Default::default(),
            })
            .map_err(|e| {
                // SAFETY: neither the fence nor the pool has been used; each is destroyed once.
                unsafe {
                    device.destroy_fence(fence, None);
                    device.destroy_command_pool(pool, None);
                }
                anyhow::anyhow!("Vulkan device '{name}': memory allocator could not start ({e})")
            })?;
            Ok((Submitter { pool, cmd, fence }, allocator))
        })();
        let (submitter, allocator) = match made {
            Ok(v) => v,
            Err(e) => {
                // SAFETY: nothing else was created from the device.
                unsafe { device.destroy_device(None) };
                return Err(e);
            }
        };
        let instance = guard.take();
        // vkCmdDispatchBase is core in Vulkan 1.1 (instance and device).
        let v11 = device::instance_api(entry) >= vk::API_VERSION_1_1 && info.api_version >= (1, 1, 0);
        Ok(VkContext {
            pipelines: Pipelines::new(v11),
            info,
            instance,
            pd,
            device,
            queue,
            allocator: ManuallyDrop::new(Mutex::new(allocator)),
            submitter: Mutex::new(submitter),
            force_staging: AtomicBool::new(false),
            group_cap: AtomicU32::new(u32::MAX),
            submissions: AtomicU64::new(0),
            barriers: AtomicU64::new(0),
            speeds: Mutex::new(Default::default()),
            lost: AtomicBool::new(false),
            pid: crate::base::threads::pid(),
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Free and total bytes of the device-local heaps (VK_EXT_memory_budget
    /// when present, otherwise total minus what this context allocated).
    pub fn memory(&self) -> (u64, u64) {
        let used = lock(&self.allocator).generate_report().total_capacity_bytes;
        device::heap_memory(&self.instance, self.pd, self.info.memory_budget, used)
    }

    /// Number of queue submissions made so far (graphs and staging copies).
    pub fn submissions(&self) -> u64 {
        self.submissions.load(Ordering::SeqCst)
    }

    /// Number of pipeline barriers recorded between dispatches so far.
    pub fn barriers(&self) -> u64 {
        self.barriers.load(Ordering::SeqCst)
    }

    /// Compute pipelines created so far (each is created once and cached).
    pub fn pipeline_count(&self) -> usize {
        self.pipelines.count()
    }

    /// Device memory blocks (vkAllocateMemory calls) currently held.
    pub fn device_allocations(&self) -> usize {
        lock(&self.allocator).generate_report().blocks.len()
    }

    /// Make new buffers device-local with staged transfers even where the
    /// device shares memory with the host (to exercise the staging path).
    pub fn set_force_staging(&self, on: bool) {
        self.force_staging.store(on, Ordering::SeqCst);
    }

    /// Cap every dispatch at `cap` workgroups per dimension (kernels then
    /// loop over the rest), to exercise the loops that respect
    /// maxComputeWorkGroupCount on small inputs.
    #[doc(hidden)]
    pub fn set_group_cap(&self, cap: u32) {
        self.group_cap.store(cap.max(1), Ordering::SeqCst);
    }

    /// The most workgroups one dispatch may have along `dim`.
    // BOUNDS-FN: every caller passes the constant 0, 1 or 2 into the 3-entry workgroup count limit.
    pub(crate) fn max_groups(&self, dim: usize) -> usize {
        let lim = self.info.limits.max_compute_work_group_count[dim].clamp(1, 65535);
        lim.min(self.group_cap.load(Ordering::Relaxed)) as usize
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(crate) fn lock_speeds(&self) -> MutexGuard<'_, super::batch::Speeds> {
        lock(&self.speeds)
    }

    pub(crate) fn count_barrier(&self) {
        self.barriers.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn lock_allocator(&self) -> MutexGuard<'_, Allocator> {
        lock(&self.allocator)
    }

    pub(crate) fn lock_submitter(&self) -> MutexGuard<'_, Submitter> {
        lock(&self.submitter)
    }

    pub(crate) fn check_live(&self) -> crate::Result<()> {
        anyhow::ensure!(self.pid == crate::base::threads::pid(), "{}", forked_message());
        anyhow::ensure!(
            !self.is_lost(),
            "Vulkan device '{}' was lost earlier (driver reset or crash); its buffers are gone. \
             Create a new Vulkan backend, or use the CPU backend",
            self.info.name
        );
        Ok(())
    }

    /// A message for a failed Vulkan call; marks the context lost on VK_ERROR_DEVICE_LOST.
    pub(crate) fn vk_error(&self, what: &str, e: vk::Result) -> anyhow::Error {
        let name = &self.info.name;
        match e {
            vk::Result::ERROR_DEVICE_LOST => {
                self.lost.store(true, Ordering::SeqCst);
                anyhow::anyhow!(
                    "Vulkan device '{name}' was lost while {what} (driver reset or crash); \
                     create a new Vulkan backend, or use the CPU backend"
                )
            }
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                let (free, total) = self.memory();
                anyhow::anyhow!(
                    "Vulkan device '{name}' ran out of memory while {what} ({} free of {}); \
                     free some tensors or buffers, or use smaller ones",
                    fmt_bytes(free as usize),
                    fmt_bytes(total as usize)
                )
            }
            other => anyhow::anyhow!("Vulkan device '{name}': {what} failed ({other})"),
        }
    }

    /// Submit the recorded command buffer once and wait for it.
    pub(crate) fn submit_and_wait(&self, s: &Submitter, what: &str) -> crate::Result<()> {
        self.check_live()?;
        let cmds = [s.cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: the command buffer is fully recorded, the fence unsignalled,
        // and the submitter lock gives exclusive use of queue and fence.
        unsafe {
            self.device
                .queue_submit(self.queue, &submit, s.fence)
                .map_err(|e| self.vk_error(what, e))?;
            self.submissions.fetch_add(1, Ordering::SeqCst);
            let waited = self.device.wait_for_fences(&[s.fence], true, u64::MAX);
            let reset = self.device.reset_fences(&[s.fence]);
            waited.map_err(|e| self.vk_error(what, e))?;
            reset.map_err(|e| self.vk_error(what, e))?;
        }
        Ok(())
    }
}

struct InstanceGuard(Option<ash::Instance>);

impl InstanceGuard {
    fn take(mut self) -> ash::Instance {
        // INVARIANT: only Drop (which consumes the guard) and take() empty
        // the slot, and take() consumes the guard too; it is Some until then.
        self.0.take().unwrap()
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        if let Some(i) = self.0.take() {
            // SAFETY: reached only on error paths, after everything made from it is gone.
            unsafe { i.destroy_instance(None) };
        }
    }
}

impl VkContext {
    /// True in the process that created the device (false in a forked child).
    pub(crate) fn in_owner_process(&self) -> bool {
        self.pid == crate::base::threads::pid()
    }
}

impl Drop for VkContext {
    fn drop(&mut self) {
        if !self.in_owner_process() {
            // The parent's device: the driver's threads are not here, so
            // its objects are left to the parent (this process only forgets them).
            return;
        }
        // SAFETY: no buffer holds the context any more (they keep it alive),
        // so nothing created from the device is in use; wait for idle first.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.pipelines.destroy(&self.device);
            let s = lock(&self.submitter);
            self.device.destroy_fence(s.fence, None);
            self.device.destroy_command_pool(s.pool, None);
            drop(s);
            ManuallyDrop::drop(&mut self.allocator);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
