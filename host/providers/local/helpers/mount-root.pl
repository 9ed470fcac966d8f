# mount-root.pl — the launch helper of a template sandbox: a private mount namespace holding the
# sandbox's writable root, then bwrap. Run by the keeper; the host prepends `my %SYS = (…);`, the
# raw system call numbers of this machine's architecture (launch/perl-helpers.ts).
#
#   RW MNT BYTES MODE UID LAYER... -- bwrap ARGS...
#
#   RW     an empty directory of the sandbox's state directory. A sized tmpfs is mounted on it in a new
#          mount namespace (the host keeps seeing it empty; everything here vanishes with the sandbox)
#          holding upper/ and work/ (the writable layer), l0… (the template's layers) and root/ (the overlay).
#   MNT    `-`, or an empty directory bwrap can reach where RW cannot be reached (bwrap resolves the
#          root's descriptor to its path as UID): the root is shown there too, in this namespace only.
#   BYTES  the tmpfs's size: the root's share of the disk budget.
#   MODE   idrange: we run as root. A user namespace mapping 0-65535 onto UID-UID+65535, owned by UID,
#                   is left on fd 8 for `bwrap --userns 8`; the layers (stored with their native owners)
#                   are mounted idmapped with the same map; then we drop to UID before exec'ing bwrap.
#          userns:  we are not root (UID is ignored): a user namespace mapping 0 onto our uid, whose
#                   layers are stored owned by that uid; overlay with userxattr; bwrap runs as root of
#                   that namespace (it must be given --cap-drop ALL).
#   LAYER  the template's layer directories, top first.
# On success fd 7 is the merged root (bwrap --bind-fd 7 /) and bwrap is exec'd in our place, so it stays
# the keeper's child. No `use strict`/`use warnings` and no modules: loading them costs about as much as
# the rest of this script (measured).

my ($rw, $mnt, $bytes, $mode, $uid, @rest) = @ARGV;
my ($sep) = grep { $rest[$_] eq '--' } 0 .. $#rest;
die "usage: RW MNT BYTES idrange|userns UID LAYER... -- CMD...\n"
  unless defined $sep && $sep > 0 && $sep < $#rest && $mode =~ /^(idrange|userns)$/ && $bytes =~ /^\d+$/ && $uid =~ /^\d+$/;
my @layers = @rest[0 .. $sep - 1];
my @cmd = @rest[$sep + 1 .. $#rest];
$uid = 0 + $uid;   # syscall() passes a string argument as a pointer: make it a number

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

if ($mode eq 'userns') {
  my ($real_uid, $real_gid) = ($<, (split ' ', $()[0]);
  sys('unshare', $CLONE_NEWUSER | $CLONE_NEWNS);
  write_file('/proc/self/setgroups', "deny\n");
  write_file('/proc/self/uid_map', "0 $real_uid 1\n");
  write_file('/proc/self/gid_map', "0 $real_gid 1\n");
} else {
  sys('unshare', $CLONE_NEWNS);
}
# Nothing propagates to or from the host from here on.
my ($none, $root, $tmpfs, $overlay) = ('none', '/', 'tmpfs', 'overlay');
sys('mount', $none, $root, $null, $MS_REC | $MS_PRIVATE, $null);
my $opts = "size=$bytes,mode=0755";
sys('mount', $tmpfs, $rw, $tmpfs, $MS_NOSUID | $MS_NODEV, $opts);
chdir($rw) or die "sandbox-mcp: chdir: $!\n";
mkdir($_, 0755) or die "sandbox-mcp: mkdir $_: $!\n" for qw(upper work root);
if ($mode eq 'idrange') { chown($uid, $uid, 'upper') or die "sandbox-mcp: chown: $!\n"; }

# The sandbox's user namespace (idrange): made by a child running as UID, so that UID owns it and bwrap,
# as UID, may join it; root writes its maps. The child only has to live until the maps are written.
my $userns;
if ($mode eq 'idrange') {
  pipe(my $ready_r, my $ready_w) or die "sandbox-mcp: pipe: $!\n";
  pipe(my $done_r, my $done_w) or die "sandbox-mcp: pipe: $!\n";
  my $pid = fork() // die "sandbox-mcp: fork: $!\n";
  if ($pid == 0) {
    close $ready_r; close $done_w;
    sys('setgroups', 0, $null); sys('setresgid', $uid, $uid, $uid); sys('setresuid', $uid, $uid, $uid);
    sys('unshare', $CLONE_NEWUSER); syswrite $ready_w, 'u'; sysread $done_r, my $b, 1; exit 0;
  }
  close $ready_w; close $done_r;
  sysread($ready_r, my $b, 1) == 1 or die "sandbox-mcp: user namespace: no answer\n";
  write_file("/proc/$pid/uid_map", "0 $uid 65536\n");
  write_file("/proc/$pid/gid_map", "0 $uid 65536\n");
  open($userns, '<', "/proc/$pid/ns/user") or die "sandbox-mcp: open userns: $!\n";
  syswrite $done_w, 'x'; waitpid($pid, 0);
}

# Each layer as l<i>: a read-only clone of its tree (idmapped in idrange), so that the overlay's options
# name only short relative paths (mountinfo inside shows them; a page of options bounds their length).
my @lower;
for my $i (0 .. $#layers) {
  mkdir("l$i", 0755) or die "sandbox-mcp: mkdir l$i: $!\n";
  my $tree = sys('open_tree', $AT_FDCWD, $layers[$i], $OPEN_TREE_CLONE | $O_CLOEXEC | $AT_RECURSIVE);
  my $set = $MOUNT_ATTR_RDONLY | $MOUNT_ATTR_NOSUID | $MOUNT_ATTR_NODEV | ($userns ? $MOUNT_ATTR_IDMAP : 0);
  my $attr = pack('QQQQ', $set, 0, 0, $userns ? fileno($userns) : 0);
  sys('mount_setattr', $tree, $empty, $AT_EMPTY_PATH, $attr, length $attr);
  my $dst = "l$i";
  sys('move_mount', $tree, $empty, $AT_FDCWD, $dst, $MOVE_MOUNT_F_EMPTY_PATH);
  syscall($SYS{close}, $tree);
  push @lower, "l$i";
}
$opts = 'lowerdir=' . join(':', @lower) . ',upperdir=upper,workdir=work' . ($mode eq 'userns' ? ',userxattr' : '');
my $merged = 'root';   # a variable: syscall() may write to a string argument, and a literal is read-only
sys('mount', $overlay, $merged, $overlay, $MS_NOSUID | $MS_NODEV, $opts);

if ($mnt ne '-') { sys('mount', $merged, $mnt, $null, $MS_BIND, $null); $merged = $mnt; }
opendir(my $dh, $merged) or die "sandbox-mcp: root: $!\n";
dup_to(fileno($dh), 7);
dup_to(fileno($userns), 8) if $userns;
chdir('/') or die "sandbox-mcp: chdir /: $!\n";

if ($mode eq 'idrange') {
  # Drop to UID before bwrap: no groups, an empty bounding set, no new privileges (what setpriv does).
  for my $cap (0 .. 63) { last if syscall($SYS{prctl}, $PR_CAPBSET_DROP, $cap, 0, 0, 0) < 0; }   # EINVAL past the last one
  sys('setgroups', 0, $null);
  sys('setresgid', $uid, $uid, $uid);
  sys('setresuid', $uid, $uid, $uid);
  sys('prctl', $PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
exec { $cmd[0] } @cmd or die "sandbox-mcp: exec: $!\n";
