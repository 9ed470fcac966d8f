# mount-root.pl — the launch helper of a template sandbox, or of any sandbox with a workspace: a private
# mount namespace holding the sandbox's writable root and its workspace, then bwrap. Run by the keeper;
# the host prepends `my %SYS = (…);`, the raw system call numbers of this machine's architecture
# (launch/perl-helpers.ts).
#
#   RW MNT BYTES MODE UID[:GID] [LAYER...] [--workspace DIR OWNER_UID OWNER_GID] -- bwrap ARGS...
#
#   RW     an empty directory of the sandbox's state directory. A sized tmpfs is mounted on it in a new
#          mount namespace (the host keeps seeing it empty; everything here vanishes with the sandbox)
#          holding upper/ and work/ (the writable layer), l0… (the template's layers) and root/ (the overlay).
#   MNT    `-`, or an empty directory bwrap can reach where RW cannot be reached (bwrap resolves the
#          root's descriptor to its path as UID): the tmpfs is shown there too, in this namespace only.
#   BYTES  the tmpfs's size: the root's share of the disk budget (a workspace's changes included), or
#          without a root, the workspace's.
#   MODE   idrange: we run as root. A user namespace mapping 0-65535 onto UID-UID+65535, owned by UID,
#                   is left on fd 8 for `bwrap --userns 8`; the layers (stored with their native owners)
#                   are mounted idmapped with the same map; then we drop to UID before exec'ing bwrap.
#          userns:  we are not root (UID is ignored): a user namespace mapping 0 onto our uid, whose
#                   layers are stored owned by that uid; overlay with userxattr; bwrap runs as root of
#                   that namespace (it must be given --cap-drop ALL).
#          drop:    we are root, the sandbox has no root of its own (base): no user namespace here; we
#                   drop to UID before exec'ing bwrap, which makes the sandbox's own.
#          keep:    we are not root, no root of its own: a user namespace mapping our uid onto itself,
#                   so bwrap (no capabilities once exec'd) makes the sandbox's namespace as it always does.
#   LAYER  the template's layer directories, top first (idrange and userns; none for drop and keep).
#   --workspace DIR OWNER_UID OWNER_GID
#          the person's directory, shown at ws/merged as an overlay whose upper (ws/upper) is on the
#          tmpfs: the sandbox's writes stay there. Its lower (ws/lower, read-only) is DIR, idmapped as
#          root (drop, idrange) so that files of OWNER_UID/OWNER_GID look like UID's, the sandbox user's.
#          bwrap binds ws/merged, ws/lower and ws/upper (under MNT when given, else RW).
#   --workspace-as IN_UID:IN_GID
#          idrange only: the workspace's files are shown as these ids inside (an image's user: host
#          UID + IN_UID) instead of root's; the upper's top directory is theirs too.
# On success fd 7 is the merged root (bwrap --bind-fd 7 /; templates only) and bwrap is exec'd in our
# place, so it stays the keeper's child. No `use strict`/`use warnings` and no modules: loading them
# costs about as much as the rest of this script (measured).

my ($rw, $mnt, $bytes, $mode, $uid, @rest) = @ARGV;
my ($sep) = grep { $rest[$_] eq '--' } 0 .. $#rest;
my $usage = "usage: RW MNT BYTES idrange|userns|drop|keep UID[:GID] [LAYER...] [--workspace DIR UID GID [--workspace-as UID:GID]] -- CMD...\n";
die $usage unless defined $sep && $sep < $#rest && $mode =~ /^(idrange|userns|drop|keep)$/ && $bytes =~ /^\d+$/ && $uid =~ /^\d+(:\d+)?$/;
my @layers = @rest[0 .. $sep - 1];
my @cmd = @rest[$sep + 1 .. $#rest];
my ($ws, $ws_uid, $ws_gid);
my ($ws_in_uid, $ws_in_gid) = (0, 0);
my ($wsa) = grep { $layers[$_] eq '--workspace-as' } 0 .. $#layers;
if (defined $wsa) {
  my $ids = $layers[$wsa + 1] // '';
  die $usage unless $mode eq 'idrange' && $ids =~ /^(\d{1,5}):(\d{1,5})$/ && $1 < 65536 && $2 < 65536;
  ($ws_in_uid, $ws_in_gid) = (0 + $1, 0 + $2);
  splice(@layers, $wsa, 2);
}
my ($wsi) = grep { $layers[$_] eq '--workspace' } 0 .. $#layers;
if (defined $wsi) {
  ($ws, $ws_uid, $ws_gid) = @layers[$wsi + 1 .. $wsi + 3];
  die $usage unless defined $ws_gid && $ws_uid =~ /^\d+$/ && $ws_gid =~ /^\d+$/;
  splice(@layers, $wsi, 4);
}
my $has_root = $mode eq 'idrange' || $mode eq 'userns';
die $usage if ($has_root && !@layers) || (!$has_root && @layers) || (!$has_root && !defined $ws);
my $is_root = $mode eq 'idrange' || $mode eq 'drop';
# UID[:GID] (drop: a base sandbox's configured group may differ from its uid; else the same id).
my ($gid);
($uid, $gid) = split /:/, $uid;
$gid //= $uid;
$uid = 0 + $uid;   # syscall() passes a string argument as a pointer: make it a number
$gid = 0 + $gid;

my ($CLONE_NEWNS, $CLONE_NEWUSER) = (0x20000, 0x10000000);
my ($MS_REC, $MS_PRIVATE, $MS_NOSUID, $MS_NODEV, $MS_BIND) = (0x4000, 0x40000, 0x2, 0x4, 0x1000);
my ($PR_CAPBSET_DROP, $PR_SET_NO_NEW_PRIVS) = (24, 38);
my ($OPEN_TREE_CLONE, $O_CLOEXEC, $AT_FDCWD, $AT_EMPTY_PATH, $AT_RECURSIVE) = (1, 0x80000, -100, 0x1000, 0x8000);
my ($MOUNT_ATTR_RDONLY, $MOUNT_ATTR_NOSUID, $MOUNT_ATTR_NODEV, $MOUNT_ATTR_IDMAP) = (0x1, 0x2, 0x4, 0x100000);
my $MOVE_MOUNT_F_EMPTY_PATH = 4;
my $null = 0;
my $empty = '';

sub sys { my $name = shift; my $r = syscall($SYS{$name}, @_); die "sandbox-mcp: $name: $!\n" if $r < 0; return $r; }
sub write_file { my ($path, $text) = @_; open(my $f, '>', $path) or die "sandbox-mcp: $path: $!\n"; syswrite($f, $text) // die "sandbox-mcp: $path: $!\n"; close($f) or die "sandbox-mcp: $path: $!\n"; }
sub dup_to { my ($fd, $to) = @_; sys('dup3', $fd, $to, 0) if $fd != $to; sys('fcntl', $to, 2, 0); }   # F_SETFD 0: kept across exec

if (!$is_root) {
  # userns: our uid is root inside (a template's files are ours); keep: our uid stays itself.
  my ($real_uid, $real_gid) = ($<, (split ' ', $()[0]);
  my ($in_uid, $in_gid) = $mode eq 'userns' ? (0, 0) : ($real_uid, $real_gid);
  sys('unshare', $CLONE_NEWUSER | $CLONE_NEWNS);
  write_file('/proc/self/setgroups', "deny\n");
  write_file('/proc/self/uid_map', "$in_uid $real_uid 1\n");
  write_file('/proc/self/gid_map', "$in_gid $real_gid 1\n");
} else {
  sys('unshare', $CLONE_NEWNS);
}
# Nothing propagates to or from the host from here on.
my ($none, $root, $tmpfs, $overlay) = ('none', '/', 'tmpfs', 'overlay');
sys('mount', $none, $root, $null, $MS_REC | $MS_PRIVATE, $null);
my $opts = "size=$bytes,mode=0755";
sys('mount', $tmpfs, $rw, $tmpfs, $MS_NOSUID | $MS_NODEV, $opts);
chdir($rw) or die "sandbox-mcp: chdir: $!\n";
if ($has_root) {
  mkdir($_, 0755) or die "sandbox-mcp: mkdir $_: $!\n" for qw(upper work root);
  if ($mode eq 'idrange') { chown($uid, $uid, 'upper') or die "sandbox-mcp: chown: $!\n"; }
}

# A user namespace with the given maps, made by a child running as OWNER (who then owns it), kept open
# as a file; the child only has to live until root has written its maps.
sub user_namespace {
  my ($owner, $uid_map, $gid_map) = @_;
  pipe(my $ready_r, my $ready_w) or die "sandbox-mcp: pipe: $!\n";
  pipe(my $done_r, my $done_w) or die "sandbox-mcp: pipe: $!\n";
  my $pid = fork() // die "sandbox-mcp: fork: $!\n";
  if ($pid == 0) {
    close $ready_r; close $done_w;
    sys('setgroups', 0, $null); sys('setresgid', $owner, $owner, $owner); sys('setresuid', $owner, $owner, $owner);
    sys('unshare', $CLONE_NEWUSER); syswrite $ready_w, 'u'; sysread $done_r, my $b, 1; exit 0;
  }
  close $ready_w; close $done_r;
  sysread($ready_r, my $b, 1) == 1 or die "sandbox-mcp: user namespace: no answer\n";
  write_file("/proc/$pid/uid_map", $uid_map);
  write_file("/proc/$pid/gid_map", $gid_map);
  open(my $ns, '<', "/proc/$pid/ns/user") or die "sandbox-mcp: open userns: $!\n";
  syswrite $done_w, 'x'; waitpid($pid, 0);
  return $ns;
}

# A read-only clone of the tree at $src (idmapped by $ns when given) moved to $dst, which must exist.
sub clone_tree {
  my ($src, $dst, $ns) = @_;
  my $tree = sys('open_tree', $AT_FDCWD, $src, $OPEN_TREE_CLONE | $O_CLOEXEC | $AT_RECURSIVE);
  my $set = $MOUNT_ATTR_RDONLY | $MOUNT_ATTR_NOSUID | $MOUNT_ATTR_NODEV | ($ns ? $MOUNT_ATTR_IDMAP : 0);
  my $attr = pack('QQQQ', $set, 0, 0, $ns ? fileno($ns) : 0);
  sys('mount_setattr', $tree, $empty, $AT_EMPTY_PATH, $attr, length $attr);
  sys('move_mount', $tree, $empty, $AT_FDCWD, $dst, $MOVE_MOUNT_F_EMPTY_PATH);
  syscall($SYS{close}, $tree);
}

# The sandbox's user namespace (idrange): 0-65535 onto UID-UID+65535, owned by UID, so that bwrap, as UID,
# may join it.
my $userns = $mode eq 'idrange' ? user_namespace($uid, "0 $uid 65536\n", "0 $uid 65536\n") : undef;

# Each layer as l<i>: a read-only clone of its tree (idmapped in idrange), so that the overlay's options
# name only short relative paths (mountinfo inside shows them; a page of options bounds their length).
my @lower;
for my $i (0 .. $#layers) {
  mkdir("l$i", 0755) or die "sandbox-mcp: mkdir l$i: $!\n";
  clone_tree($layers[$i], "l$i", $userns);
  push @lower, "l$i";
}
my $xattr = $is_root ? '' : ',userxattr';
my $merged = 'root';   # a variable: syscall() may write to a string argument, and a literal is read-only
if ($has_root) {
  $opts = 'lowerdir=' . join(':', @lower) . ',upperdir=upper,workdir=work' . $xattr;
  sys('mount', $overlay, $merged, $overlay, $MS_NOSUID | $MS_NODEV, $opts);
}

# The workspace: the person's directory under an upper of its own on this tmpfs (counted in its size).
# As root its files are shown as the sandbox user's (an idmapped lower: OWNER_UID -> UID); the upper's
# top directory, which gives the merged top its owner and mode, is made like the directory's.
if (defined $ws) {
  my @st = stat($ws) or die "sandbox-mcp: workspace: $!\n";
  mkdir($_, 0755) or die "sandbox-mcp: mkdir $_: $!\n" for qw(ws ws/upper ws/work ws/lower ws/merged);
  my ($as_uid, $as_gid) = ($uid + $ws_in_uid, $gid + $ws_in_gid);
  my $ws_ns = $is_root ? user_namespace(0, "$ws_uid $as_uid 1\n", "$ws_gid $as_gid 1\n") : undef;
  clone_tree($ws, 'ws/lower', $ws_ns);
  if ($is_root) { chown($as_uid, $as_gid, 'ws/upper') or die "sandbox-mcp: chown: $!\n"; }
  chmod($st[2] & 07777, 'ws/upper') or die "sandbox-mcp: chmod: $!\n";
  my $ws_merged = 'ws/merged';
  my $ws_opts = 'lowerdir=ws/lower,upperdir=ws/upper,workdir=ws/work' . $xattr;
  sys('mount', $overlay, $ws_merged, $overlay, $MS_NOSUID | $MS_NODEV, $ws_opts);
}

# bwrap, as UID, must reach what it binds by path: the whole tmpfs, shown at MNT.
my $here = $rw;
if ($mnt ne '-') { sys('mount', $rw, $mnt, $null, $MS_BIND | $MS_REC, $null); $here = $mnt; }
# $dh lives on to the exec: opendir may have been given fd 7 itself (the keeper passes 0-6), and
# leaving a block would close it.
my $dh;
if ($has_root) {
  opendir($dh, "$here/root") or die "sandbox-mcp: root: $!\n";
  dup_to(fileno($dh), 7);
}
dup_to(fileno($userns), 8) if $userns;
chdir('/') or die "sandbox-mcp: chdir /: $!\n";

if ($is_root) {
  # Drop to UID before bwrap: no groups, an empty bounding set, no new privileges (what setpriv does).
  for my $cap (0 .. 63) { last if syscall($SYS{prctl}, $PR_CAPBSET_DROP, $cap, 0, 0, 0) < 0; }   # EINVAL past the last one
  sys('setgroups', 0, $null);
  sys('setresgid', $gid, $gid, $gid);
  sys('setresuid', $uid, $uid, $uid);
  sys('prctl', $PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
exec { $cmd[0] } @cmd or die "sandbox-mcp: exec: $!\n";
