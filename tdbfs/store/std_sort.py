"""libstdc++'s `std::sort` (introsort: median-of-three quicksort down to runs of 16, then insertion sort),
ported step for step because TileDB orders the fragments a reader takes with it
(`ArrayDirectory::compute_filtered_uris` sorts by t1 only, `TimestampedURI::operator<`,
tiledb/sm/filesystem/uri.h). The sort is not stable: with more than 16 fragments, those of equal t1 come
out in an order only this port predicts, and the last of them wins a cell they all wrote.
Up to 16 elements it is an insertion sort, hence stable.
"""

from __future__ import annotations

#: std::__introsort_loop's threshold (_S_threshold)
THRESHOLD = 16


def std_sort(a: list, less) -> list:
    """Sort `a` in place as libstdc++'s std::sort(a.begin(), a.end(), less) does; returns `a`."""
    n = len(a)
    if n < 2:
        return a

    def swap(i, j):
        a[i], a[j] = a[j], a[i]

    def median_to_first(r, x, y, z):                 # std::__move_median_to_first
        if less(a[x], a[y]):
            if less(a[y], a[z]):
                swap(r, y)
            elif less(a[x], a[z]):
                swap(r, z)
            else:
                swap(r, x)
        elif less(a[x], a[z]):
            swap(r, x)
        elif less(a[y], a[z]):
            swap(r, z)
        else:
            swap(r, y)

    def partition(first, last, pivot):               # std::__unguarded_partition
        while True:
            while less(a[first], a[pivot]):
                first += 1
            last -= 1
            while less(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            swap(first, last)
            first += 1

    def adjust_heap(first, hole, length, value):     # std::__adjust_heap (with __push_heap)
        top = child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def heap_sort(first, last):                      # std::__partial_sort(first, last, last)
        length = last - first
        for parent in range((length - 2) // 2, -1, -1):
            adjust_heap(first, parent, length, a[first + parent])
        while last - first > 1:
            last -= 1
            value = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, value)

    def introsort(first, last, depth):
        while last - first > THRESHOLD:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            median_to_first(first, first + 1, first + (last - first) // 2, last - 1)
            cut = partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    def linear_insert(i):                            # std::__unguarded_linear_insert
        value = a[i]
        j = i - 1
        while less(value, a[j]):
            a[i] = a[j]
            i = j
            j -= 1
        a[i] = value

    introsort(0, n, 2 * (n.bit_length() - 1))
    for i in range(1, min(n, THRESHOLD)):            # std::__insertion_sort of the first 16
        if less(a[i], a[0]):
            value = a[i]
            a[1:i + 1] = a[0:i]
            a[0] = value
        else:
            linear_insert(i)
    for i in range(THRESHOLD, n):                    # std::__unguarded_insertion_sort of the rest
        linear_insert(i)
    return a
