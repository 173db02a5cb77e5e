// A caching CPU allocator for torch's large tensors, installed around the policy update
// (rlvr/kernels/block_cache.py has the why and the measurements).
//
// Every tensor of at least min_bytes (2 MiB or more) gets its own anonymous mapping, rounded
// up to whole 4 KiB pages. A freed block is kept, its pages resident, and handed to the next
// request of its size (up to 1/8 larger), so a micro-batch's activations and gradients reuse
// the pages the one before faulted in instead of the kernel zero-filling fresh ones. Resident
// memory stays bounded: before a miss maps a new block, the least recently freed blocks are
// unmapped until everything mapped fits in the largest live total seen since enable plus
// headroom bytes. disable() puts the previous allocator back and unmaps every
// free block; a block still live then is unmapped when freed. Smaller tensors go to the
// allocator that was installed before.

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kMinBytes = size_t(2) << 20;
constexpr size_t kPage = size_t(4) << 10;

struct FreeBlock {
  void* ptr;
  size_t size;
};

class BlockCache final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (!on_.load(std::memory_order_acquire) || n < min_bytes_) return base_->allocate(n);
    const size_t size = (n + kPage - 1) & ~(kPage - 1);
    void* ptr = take(size);
    if (ptr == nullptr) {
      ptr = map_block(size);
      if (ptr == nullptr) {  // out of address space or memory: retry with every free block gone
        trim();
        ptr = map_block(size);
      }
      if (ptr == nullptr) return base_->allocate(n);  // reports the out-of-memory error
      std::lock_guard<std::mutex> guard(mu_);
      owned_[ptr] = size;
      mapped_ += size;
      add_live(size);
    }
    return {ptr, ptr, &BlockCache::release, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }

  bool enable(size_t min_bytes, size_t headroom) {
    std::lock_guard<std::mutex> guard(mu_);
    if (on_.load()) return true;
    base_ = c10::GetCPUAllocator();
    min_bytes_ = std::max(min_bytes, kMinBytes);
    headroom_ = headroom;
    peak_live_ = live_;
    on_.store(true, std::memory_order_release);
    c10::SetCPUAllocator(this, 0);
    if (c10::GetCPUAllocator() != this) {  // another allocator holds a higher priority
      on_.store(false);
      return false;
    }
    return true;
  }

  void disable() {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (!on_.load()) return;
      on_.store(false, std::memory_order_release);
      c10::SetCPUAllocator(base_, 0);
    }
    trim();
  }

  void trim() {
    std::list<FreeBlock> gone;
    {
      std::lock_guard<std::mutex> guard(mu_);
      gone.swap(lru_);
      by_size_.clear();
      for (const FreeBlock& b : gone) forget(b);
    }
    for (const FreeBlock& b : gone) munmap(b.ptr, b.size);
  }

  void stats(uint64_t* out) {
    std::lock_guard<std::mutex> guard(mu_);
    const uint64_t values[] = {live_, cached_, mapped_, peak_mapped_, hits_, misses_, evicted_};
    std::copy(std::begin(values), std::end(values), out);
  }

  static BlockCache& instance() {
    static BlockCache* cache = new BlockCache();  // never destroyed: freed blocks outlive exit
    return *cache;
  }

 private:
  using Lru = std::list<FreeBlock>;

  // A free block of size in [size, size + size / 8], or nullptr after making room for a new one.
  void* take(size_t size) {
    std::vector<FreeBlock> evict;
    {
      std::lock_guard<std::mutex> guard(mu_);
      auto it = by_size_.lower_bound(size);
      if (it != by_size_.end() && it->first <= size + size / 8) {
        const FreeBlock b = *it->second;
        lru_.erase(it->second);
        by_size_.erase(it);
        cached_ -= b.size;
        ++hits_;
        add_live(b.size);
        return b.ptr;
      }
      ++misses_;
      const size_t limit = std::max(peak_live_, live_ + size) + headroom_;
      while (!lru_.empty() && mapped_ + size > limit) {
        const FreeBlock b = lru_.front();
        remove_index(b);
        lru_.pop_front();
        forget(b);
        evict.push_back(b);
        ++evicted_;
      }
    }
    for (const FreeBlock& b : evict) munmap(b.ptr, b.size);
    return nullptr;
  }

  static void release(void* ptr) { instance().put(ptr); }

  void put(void* ptr) {
    std::unique_lock<std::mutex> guard(mu_);
    auto it = owned_.find(ptr);
    const size_t size = it->second;
    live_ -= size;
    if (on_.load(std::memory_order_acquire)) {
      lru_.push_back({ptr, size});
      by_size_.emplace(size, std::prev(lru_.end()));
      cached_ += size;
      return;
    }
    owned_.erase(it);
    mapped_ -= size;
    guard.unlock();
    munmap(ptr, size);
  }

  // The system's default page size (no MADV_HUGEPAGE): on a VM that hands freed memory back
  // to its host, a fresh huge page cost ~2.3 ms a MiB to fault in against ~0.56 for 4 KiB
  // pages, and reused blocks fault nothing either way (block_cache.py has the measurements).
  static void* map_block(size_t size) {
    void* ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return ptr == MAP_FAILED ? nullptr : ptr;
  }

  void add_live(size_t size) {  // mu_ held
    live_ += size;
    peak_live_ = std::max(peak_live_, live_);
    peak_mapped_ = std::max(peak_mapped_, mapped_);
  }

  void remove_index(const FreeBlock& b) {  // mu_ held; b is in lru_
    auto range = by_size_.equal_range(b.size);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second->ptr == b.ptr) {
        by_size_.erase(it);
        return;
      }
    }
  }

  void forget(const FreeBlock& b) {  // mu_ held; b is free and leaves the cache
    owned_.erase(b.ptr);
    cached_ -= b.size;
    mapped_ -= b.size;
  }

  std::mutex mu_;
  std::atomic<bool> on_{false};
  c10::Allocator* base_ = nullptr;
  size_t min_bytes_ = kMinBytes;
  size_t headroom_ = 0;
  Lru lru_;                                         // free blocks, least recently freed first
  std::multimap<size_t, Lru::iterator> by_size_;    // the same blocks by size
  std::unordered_map<void*, size_t> owned_;         // every mapped block, live or free
  size_t live_ = 0, cached_ = 0, mapped_ = 0, peak_live_ = 0, peak_mapped_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evicted_ = 0;
};

}  // namespace

extern "C" {

int rlvr_block_cache_enable(uint64_t min_bytes, uint64_t headroom) {
  return BlockCache::instance().enable(min_bytes, headroom) ? 1 : 0;
}

void rlvr_block_cache_disable() { BlockCache::instance().disable(); }

// out[7]: live, cached (free, kept), mapped bytes, peak mapped bytes, hits, misses, evictions.
void rlvr_block_cache_stats(uint64_t* out) { BlockCache::instance().stats(out); }

}  // extern "C"
