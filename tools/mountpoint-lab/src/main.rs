//! replmon's lab mount: Mountpoint for Amazon S3's file system (prefetcher, upload path, inode
//! cache, optional local disk data cache) on an S3-compatible endpoint, from the published crates.
//!
//! It wires what `mount-s3` wires for a plain bucket mount (client -> superblock -> file system ->
//! FUSE session), with only the options the lab needs. Runs in the foreground until unmounted
//! (`fusermount3 -u`) or sent SIGINT/SIGTERM (the crate's handler unmounts).
use anyhow::{Context, Result};
use clap::Parser;
use mountpoint_s3_client::{config::AddressingStyle, user_agent::UserAgent};
use mountpoint_s3_fs::{
    data_cache::{CacheLimit, DataCacheConfig, DiskDataCacheConfig, ManagedCacheDir},
    fuse::config::{FuseOptions, FuseSessionConfig, MountPoint},
    logging::{init_logging, LoggingConfig},
    memory::{CandidateSize, PagedPool},
    s3::{
        config::{ClientConfig, MemoryLimitSetting, PartConfig, Region, TargetThroughputSetting},
        Bucket, Prefix, S3Path,
    },
    MountpointConfig, Runtime, S3FilesystemConfig, Superblock, SuperblockConfig,
};

#[derive(Parser, Debug)]
#[clap(version, about = "Mount an S3-compatible bucket with Mountpoint's file-system crates (replmon lab)")]
struct Args {
    bucket: String,
    mount_point: String,
    /// e.g. http://127.0.0.1:9000 (path-style addressing is forced: the lab has no DNS buckets)
    #[clap(long)]
    endpoint_url: String,
    #[clap(long, default_value = "us-east-1")]
    region: String,
    /// Key prefix to mount (ends with '/')
    #[clap(long, default_value = "")]
    prefix: String,
    /// Local disk data cache directory (Mountpoint's `--cache`)
    #[clap(long)]
    cache: Option<String>,
    #[clap(long)]
    cache_limit_bytes: Option<u64>,
    /// Part size for GET and multipart PUT (Mountpoint's default: 8 MiB)
    #[clap(long, default_value_t = 8 * 1024 * 1024)]
    part_size: usize,
    /// Network throughput target the CRT plans for (Mountpoint's default: 10 Gbit/s)
    #[clap(long, default_value_t = 10.0)]
    throughput_gbps: f64,
    #[clap(long)]
    allow_delete: bool,
    #[clap(long)]
    allow_overwrite: bool,
    #[clap(long, default_value_t = 16)]
    max_threads: usize,
    /// Accepted for `mount-s3` compatibility: this binary always runs in the foreground
    #[clap(long)]
    foreground: bool,
    /// Accepted for `mount-s3` compatibility: addressing is always path-style
    #[clap(long)]
    force_path_style: bool,
    #[clap(long, default_value = "warn,awscrt=off")]
    log_filter: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let _logging = init_logging(LoggingConfig {
        log_file: None,
        log_to_stdout: true,
        default_filter: args.log_filter.clone(),
    })?;

    let fs_config = S3FilesystemConfig {
        allow_delete: args.allow_delete,
        allow_overwrite: args.allow_overwrite,
        ..Default::default()
    };
    let fuse_config = FuseSessionConfig::new(
        MountPoint::new(&args.mount_point)?,
        FuseOptions {
            read_only: false,
            allow_other: false,
            allow_root: false,
            auto_unmount: false,
            clone_fd: false,
        },
        args.max_threads,
    )?;

    // Mountpoint's `--cache DIR`: a managed sub-directory, emptied at mount and removed at exit.
    let mut managed_cache_dir = None;
    let disk_cache_config = match &args.cache {
        None => None,
        Some(dir) => {
            let managed = ManagedCacheDir::new_from_parent_with_cache_key(dir, None, true)
                .context("failed to create the cache directory")?;
            let config = DiskDataCacheConfig {
                cache_directory: managed.as_path_buf(),
                block_size: 1024 * 1024,
                limit: match args.cache_limit_bytes {
                    Some(max) => CacheLimit::TotalSize { max_size: max as usize },
                    None => CacheLimit::default(),
                },
            };
            managed_cache_dir = Some(managed);
            Some(config)
        }
    };
    let data_cache = DataCacheConfig { disk_cache_config, express_cache_config: None };
    let superblock_config = SuperblockConfig {
        cache_config: fs_config.cache_config.clone(),
        s3_personality: fs_config.s3_personality,
    };
    let mp_config = MountpointConfig::new(fuse_config, fs_config, data_cache)?;

    let mem_limit = mountpoint_s3_fs::memory::MINIMUM_MEM_LIMIT.max(512 * 1024 * 1024);
    let client_config = ClientConfig {
        region: Region::new_user_specified(args.region.clone()),
        endpoint_url: Some(args.endpoint_url.clone()),
        addressing_style: AddressingStyle::Path,
        dual_stack: false,
        transfer_acceleration: false,
        auth_config: Default::default(), // the default chain: AWS_ACCESS_KEY_ID / _SECRET_ from env
        requester_pays: false,
        expected_bucket_owner: None,
        throughput_target: TargetThroughputSetting::User { gbps: args.throughput_gbps },
        bind: None,
        part_config: PartConfig::with_part_size(args.part_size)
            .validate(MemoryLimitSetting::Default(mem_limit))?,
        user_agent: UserAgent::new(Some("replmon-lab".to_string())),
        tls_config: None,
    };
    let pool = PagedPool::config()
        .with_candidate_sizes([
            CandidateSize::new(client_config.part_config.read_size_bytes),
            CandidateSize::new(client_config.part_config.write_size_bytes),
        ])
        .with_memory_limit(mem_limit)
        .build();
    let s3_path = S3Path::new(
        Bucket::new(args.bucket.clone())?,
        Prefix::new(&args.prefix).context("--prefix must be empty or end with '/'")?,
    );
    let client = client_config
        .create_client(pool.clone(), Some(&s3_path))
        .context("failed to create the S3 client")?;
    let runtime = Runtime::new(client.event_loop_group());
    let superblock = Superblock::new(client.clone(), s3_path, superblock_config);
    let mut session = mp_config
        .create_fuse_session(superblock, client, runtime, pool)
        .context("failed to create the FUSE session")?;
    if let Some(dir) = managed_cache_dir {
        session.run_on_close(Box::new(move || drop(dir)));
    }
    eprintln!("replmon-mountpoint: mounted s3://{}/{} at {}", args.bucket, args.prefix, args.mount_point);
    session.join().context("FUSE session failed")?;
    Ok(())
}
