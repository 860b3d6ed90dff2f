#!/usr/bin/env python3
# png_edges.py: a script-free overflow check of a page's screenshot: the page's side margins
# (outside the body's max-width) must be all background; anything there is an element wider
# than the page. Reads 8-bit RGB/RGBA PNGs (what chromium --screenshot writes) with zlib alone.
#   png_edges.py SHOT.png          prints "W H inked" and exits 1 if a margin column has ink
import struct, sys, zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                sys.exit(f"{path}: PNG of depth {depth} colour type {ctype} not read here")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = read_png(sys.argv[1])
    # body: max-width 1100 px centred with 20 px padding in a viewport less its scrollbar (0 or
    # 15 px): content from x 142 or 150 to 1242 or 1250 at 1400 px; the scrollbar's 20 px skipped
    body = 1100
    left, right = (w - 15 - body) // 2 - 6, (w + body) // 2 + 6
    cols = [x for x in range(8, left)] + [x for x in range(right, w - 20)]
    bad, inked = [], 0
    for y, line in enumerate(rows):
        for x in range(0, w - 20, 7):
            px = line[x * bpp:x * bpp + 3]
            inked += px != b"\xff\xff\xff"
        for x in cols:
            if line[x * bpp:x * bpp + 3] != b"\xff\xff\xff":
                bad.append((x, y))
                break
    print(w, h, inked)
    if bad:
        print(f"ink outside the page's column at {len(bad)} rows, first at x={bad[0][0]} y={bad[0][1]}")
        sys.exit(1)


main()
