-- A call-heavy Lua program for benches/tracing/real: recursive calls, string building, a table
-- sorted with a Lua comparison function. The argument scales it (27: about a second).
local n = tonumber(arg[1]) or 27
local function fib(k) if k < 2 then return k end return fib(k - 1) + fib(k - 2) end
local words = {}
for i = 1, n * 2000 do words[#words + 1] = string.format("%08x", (i * 2654435761) % 4294967296) end
table.sort(words, function(a, b) return a > b end)
print(fib(n), #words, words[1])
